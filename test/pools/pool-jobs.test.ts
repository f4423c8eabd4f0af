import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { enqueue } from '../../queues/jobs.ts';
import { QUEUES } from '../../queues/names.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { AppConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import { BullmqWorkRequests } from '../../src/jobs/bullmq-work-requests.ts';
import { MemoryWorkRequests } from '../../src/work/memory-work-requests.ts';
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
      const work = new BullmqWorkRequests({ reconcile: queue });
      const now = Date.now();
      await work.lookAtPool('web', 60_000, now);
      await work.lookAtPool('web', 60_000, now);
      await work.reconcilePool('web');
      await work.reconcilePool('web');
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
    const proxies = new RedisProxyStore(redis, uniquePrefix());
    const work = new MemoryWorkRequests();
    try {
      await proxies.apply({ metadata: { name: 'web-abcde', labels: { [POOL_LABEL]: 'web' } }, spec: { provider: 'local' } });
      await proxies.apply({ metadata: { name: 'plain', labels: {} }, spec: { provider: 'local' } });
      const evicted = reconcileAfterEviction(work, proxies);
      await evicted('web-abcde');
      await evicted('plain');
      expect(work.requests).toEqual([
        { kind: 'reconcile-proxy', proxy: 'web-abcde' },
        { kind: 'reconcile-pool', pool: 'web' },
        { kind: 'reconcile-proxy', proxy: 'plain' },
      ]);
    } finally {
      await proxies.close();
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
      await new BullmqWorkRequests({ reconcile: queue }).lookAtPool('idle', 100);
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
