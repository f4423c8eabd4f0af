import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { enqueue } from '../../queues/jobs.ts';
import { QUEUES } from '../../queues/names.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { AppConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import { requestPoolLook, requestPoolReconcile } from '../../src/pools/request-pool-reconcile.ts';
import { RedisPoolStore } from '../../src/store/redis-pool-store.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { POOL_LABEL } from '../../src/model/pool-resource.ts';
import { reconcileAfterEviction } from '../../workers/pool-processor.ts';
import { testConfig, uniquePrefix } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';
import { JOBS } from '../../src/work/jobs.ts';

describe('pool reconcile jobs', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'));
  });
  afterAll(() => {
    redis.disconnect();
  });

  test('a pending delayed look never swallows an immediate request, and one due time is added once', async () => {
    const queue = new Queue(QUEUES.reconcile, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix: uniquePrefix() });
    try {
      const now = Date.now();
      await requestPoolLook(queue, 'web', 60_000, now);
      await requestPoolLook(queue, 'web', 60_000, now);
      await requestPoolReconcile(queue, 'web');
      await requestPoolReconcile(queue, 'web');
      const delayed = await queue.getJobs(['delayed']);
      expect(delayed.map((j) => [j.name, j.data as unknown])).toEqual([['pool-look', { pool: 'web' }]]);
      expect(delayed[0]?.id).toBe(`pool-look-web-${Math.ceil((now + 60_000) / 1000)}`);
      // The reconcile is waiting now, deduplicated per pool, whatever look is pending.
      const waiting = await queue.getJobs(['waiting']);
      expect(waiting.map((j) => [j.name, j.data as unknown])).toEqual([['pool-reconcile', { pool: 'web' }]]);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  test('an eviction asks for the proxy’s reconcile and, for a pool member, its pool’s', async () => {
    const prefix = uniquePrefix();
    const queue = new Queue(QUEUES.reconcile, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix });
    const proxies = new RedisProxyStore(redis, prefix);
    try {
      await proxies.apply({ metadata: { name: 'web-abcde', labels: { [POOL_LABEL]: 'web' } }, spec: { provider: 'local' } });
      await proxies.apply({ metadata: { name: 'plain', labels: {} }, spec: { provider: 'local' } });
      const evicted = reconcileAfterEviction(queue, proxies);
      await evicted('web-abcde');
      await evicted('plain');
      const jobs = await queue.getJobs(['waiting']);
      expect(jobs.map((j) => [j.name, j.data as unknown]).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual([
        ['pool-reconcile', { pool: 'web' }],
        ['reconcile', { proxy: 'plain' }],
        ['reconcile', { proxy: 'web-abcde' }],
      ]);
    } finally {
      await proxies.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  test('in a worker: a look that comes due, and the periodic resync, reconcile the pool', async () => {
    const config: AppConfig = testConfig({ queues: ['reconcile'] });
    const roles: RunningRoles = await runRoles(config, ['worker'], silentLogger());
    const pools = new RedisPoolStore(redis, config.redis.prefix);
    const queue = new Queue(QUEUES.reconcile, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix: config.redis.prefix });
    try {
      const doc = {
        kind: 'ProxyPool' as const,
        metadata: { name: 'idle', labels: {} },
        spec: { replicas: 0, maxSurge: 1, template: { metadata: { labels: {} }, spec: { provider: 'local' } } },
      };
      await pools.apply(doc);
      await requestPoolLook(queue, 'idle', 100);
      await waitFor('the look to reconcile the pool', async () => (await pools.get('idle'))?.status.observedGeneration === 1);
      expect((await pools.get('idle'))?.status.conditions[0]).toMatchObject({ type: 'Ready', status: 'True', message: '0 of 0 members ready' });
      await pools.apply({ ...doc, metadata: { name: 'idle', labels: { tier: 'gold' } } });
      await enqueue(queue, JOBS.resync, {});
      await waitFor('the resync to reconcile the pool', async () => (await pools.get('idle'))?.status.observedGeneration === 2);
    } finally {
      await roles.close();
      await pools.close();
      await queue.close();
    }
  });
});
