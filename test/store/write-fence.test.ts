import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { PickKeys } from '../../src/pools/pick-keys.ts';
import { FeedbackRateLimit } from '../../src/pools/feedback-rate-limit.ts';
import { fenceWrites, WriteTooLateError } from '../../src/redis/write-fence.ts';
import { RedisMemberReplacements } from '../../src/store/member-replacements.ts';
import { RedisPoolStore } from '../../src/store/redis-pool-store.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { uniquePrefix } from '../support/config.ts';

/**
 * Fenced writes (src/redis/write-fence.ts) against the run's Redis: a write whose fence Redis's
 * clock has passed is refused by the script itself (as when it was queued behind a stall and
 * reaches Redis after the API answered 503), and nothing of it is written; one within its fence is.
 * The signals have not ended, so only Redis's clock can refuse them.
 */
describe('writes fenced by a "not after" time', () => {
  let redis: Redis;
  const prefix = uniquePrefix();
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    await redis.quit();
  });

  const fenced = (notAfterMs: number): AbortSignal => {
    const signal = new AbortController().signal;
    fenceWrites(signal, notAfterMs);
    return signal;
  };
  const past = (): AbortSignal => fenced(Date.now() - 60_000);
  const future = (): AbortSignal => fenced(Date.now() + 60_000);

  test('a proxy apply or deletion past its fence is refused and writes nothing; within it, it is written', async () => {
    const proxies = new RedisProxyStore(redis, prefix);
    await expect(proxies.apply({ metadata: { name: 'late', labels: {} }, spec: { provider: 'local' } }, past())).rejects.toBeInstanceOf(WriteTooLateError);
    expect(await proxies.get('late')).toBeUndefined();
    expect(await proxies.credentials('late')).toBeUndefined();
    await proxies.apply({ metadata: { name: 'on-time', labels: {} }, spec: { provider: 'local' } }, future());
    await expect(proxies.requestDeletion('on-time', {}, past())).rejects.toMatchObject({ code: 'ERR_STORE_UNAVAILABLE' });
    expect((await proxies.get('on-time'))?.metadata.deletionRequestedAt).toBeUndefined();
    expect((await proxies.requestDeletion('on-time', {}, future())).metadata.deletionRequestedAt).toBeDefined();
    await proxies.close();
  });

  test('a pool apply past its fence is refused; unfenced writes (reconcile, status) are unchanged', async () => {
    const pools = new RedisPoolStore(redis, prefix);
    const doc = {
      kind: 'ProxyPool' as const,
      metadata: { name: 'p', labels: {} },
      spec: { replicas: 1, maxSurge: 1, template: { metadata: { labels: {} }, spec: { provider: 'local' } } },
    };
    await expect(pools.apply(doc, past())).rejects.toBeInstanceOf(WriteTooLateError);
    expect(await pools.get('p')).toBeUndefined();
    expect((await pools.apply(doc)).outcome).toBe('created');
    await pools.close();
  });

  test('a replacement request and a feedback rate-limit token past their fence are refused and leave no trace', async () => {
    const replacements = new RedisMemberReplacements(redis, prefix);
    await expect(replacements.request('p', 'p-aaaaa', 'test', past())).rejects.toBeInstanceOf(WriteTooLateError);
    expect((await replacements.list('p')).size).toBe(0);
    expect(await replacements.request('p', 'p-aaaaa', 'test', future())).toBe(true);
    const keys = new PickKeys(prefix);
    const limit = new FeedbackRateLimit(redis, keys, 1, 1);
    await expect(limit.take('caller', past())).rejects.toBeInstanceOf(WriteTooLateError);
    expect(await redis.exists(keys.rate('caller'))).toBe(0);
    expect(await limit.take('caller', future())).toBe(0);
  });
});
