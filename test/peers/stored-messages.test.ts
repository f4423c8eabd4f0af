/**
 * A peer's message has no length of its own (a libvirt daemon sent a 4 MiB one): reconcile stores it
 * cut to 1,024 characters in `status.lastError`, the Ready condition and the Failed event, in real
 * Redis (the proxy store and the event stream).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { RedisEventStore } from '../../src/events/redis-event-store.ts';
import { silentLogger } from '../../src/logging.ts';
import { ProvisioningError } from '../../src/providers/lifecycle.ts';
import { reconcileProxy } from '../../src/proxies/reconcile.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { uniquePrefix } from '../support/config.ts';
import { RecordingLifecycle } from '../support/recording-lifecycle.ts';

let redis: Redis;
let store: RedisProxyStore;
let events: RedisEventStore;

beforeAll(() => {
  redis = new Redis(inject('redisUrl'));
  const prefix = uniquePrefix();
  store = new RedisProxyStore(redis, prefix);
  events = new RedisEventStore(redis, prefix, { maxCount: 100, maxAgeMs: 3_600_000 }, silentLogger());
});
afterAll(async () => {
  await events.close();
  await store.close();
  redis.disconnect();
});

it('cuts a 4 MiB provider message to 1,024 characters in lastError, the Ready condition and the event', async () => {
  await store.apply({ metadata: { name: 'huge', labels: {} }, spec: { provider: 'local' } });
  const lifecycle = new RecordingLifecycle();
  lifecycle.failNext = new ProvisioningError(`defining domain: ${'x'.repeat(4 * 1024 * 1024)}`);
  const signal = AbortSignal.timeout(30_000);

  const outcome = await reconcileProxy(
    'huge',
    {
      proxies: store,
      lifecycles: new Map([['local', lifecycle]]),
      fleet: 'test',
      probe: async () => ({ ok: true, egressIp: '127.0.0.1' }),
      events: events.sink('worker'),
    },
    signal,
  );

  expect(outcome.kind).toBe('failed');
  const proxy = await store.get('huge', signal);
  expect(proxy?.status.phase).toBe('Failed');
  expect(proxy?.status.lastError).toHaveLength(1024);
  expect(proxy?.status.lastError?.endsWith('…')).toBe(true);
  expect(proxy?.status.conditions.find((c) => c.type === 'Ready')?.message).toHaveLength(1024);
  await events.close();
  const [failed] = await events.list({ reason: 'Failed', limit: 10 });
  expect(failed?.message).toHaveLength(1024);
});
