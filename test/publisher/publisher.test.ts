import { once } from 'node:events';
import { Queue, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import { defaultJobOptions } from '../../queues/options.ts';
import { EgressError } from '../../src/errors.ts';
import { silentLogger } from '../../src/logging.ts';
import { createJobMetrics } from '../../src/metrics/job-metrics.ts';
import { createRegistry } from '../../src/metrics/registry.ts';
import { startPublisherRole } from '../../workers/publisher-role.ts';
import { RedisStatusStore } from '../../src/store/redis-status-store.ts';
import type { StatusStore } from '../../src/store/status-store.ts';
import { testConfig } from '../support/config.ts';
import type { CheckResultData } from '../../src/health/check-result.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function result(checkedAt: string, ready: boolean): CheckResultData {
  return {
    provider: 'local',
    checkJobId: `check-${checkedAt}`,
    checkedAt,
    targets: [{ target: 'localhost', ready, reason: ready ? 'Ok' : 'Error', message: ready ? 'ok' : 'disk full', details: {}, durationSeconds: 0.01 }],
  };
}

async function setup(wrap: (store: StatusStore) => StatusStore = (s) => s) {
  const config = testConfig();
  const redis = new Redis(inject('redisUrl'));
  const store = new RedisStatusStore(redis, config.redis.prefix);
  const registry = createRegistry();
  const publisher = await startPublisherRole({
    config,
    redisTarget: inject('redisUrl'),
    store: wrap(store),
    logger: silentLogger(),
    jobMetrics: createJobMetrics(registry),
  });
  const results = new Queue(QUEUES.results, {
    connection: redisOptions(inject('redisUrl'), 'producer'),
    prefix: config.redis.prefix,
    defaultJobOptions: defaultJobOptions(config),
  });
  cleanups.push(
    () => redis.quit(),
    () => store.close(),
    () => publisher.close(),
    () => results.close(),
  );
  const processed = async (): Promise<Job> => {
    const [job] = (await once(publisher.worker, 'completed')) as [Job];
    return job;
  };
  return { store, publisher, results, processed, redis };
}

describe('publisher', () => {
  test('a redelivered result changes nothing', async () => {
    const { store, results, processed } = await setup();
    const first = processed();
    await results.add('result', result('2026-11-01T10:00:00.000Z', true), { jobId: 'r1' });
    await first;
    const flip = processed();
    await results.add('result', result('2026-11-01T10:01:00.000Z', false), { jobId: 'r2' });
    await flip;
    const before = JSON.stringify(await store.getProviderHealth('local'));
    // The same result again, as a redelivery after a crash would bring it (a new job id).
    const again = processed();
    await results.add('result', result('2026-11-01T10:01:00.000Z', false), { jobId: 'r2-redelivered' });
    await again;
    expect(JSON.stringify(await store.getProviderHealth('local'))).toBe(before);
    const ph = await store.getProviderHealth('local');
    expect(ph?.status).toMatchObject({ ready: false, lastTransitionTime: '2026-11-01T10:01:00.000Z' });
  });

  test('a batch is folded in order into one write per provider; its redelivery changes nothing', async () => {
    const { store, results, processed } = await setup();
    const batch = {
      results: [
        result('2026-11-01T10:00:00.000Z', true),
        { ...result('2026-11-01T10:00:30.000Z', true), provider: 'removed' },
        result('2026-11-01T10:01:00.000Z', false),
        result('2026-11-01T10:02:00.000Z', false),
      ],
    };
    const done = processed();
    await results.add('results', batch, { jobId: 'batch-1' });
    await done;
    const ph = await store.getProviderHealth('local');
    // The flip inside the batch (ready → not ready at 10:01) is the transition; 10:02 did not flip.
    expect(ph?.status).toMatchObject({ ready: false, lastTransitionTime: '2026-11-01T10:01:00.000Z', lastCheckTime: '2026-11-01T10:02:00.000Z' });
    expect(await store.getProviderHealth('removed')).toBeUndefined();
    const again = processed();
    await results.add('results', batch, { jobId: 'batch-1-redelivered' });
    await again;
    expect(await store.getProviderHealth('local')).toEqual(ph);
  });

  test('a failed status write is retried until it lands', async () => {
    let failures = 2;
    const { store, results, publisher } = await setup((inner) => ({
      getProviderHealth: (n, s) => inner.getProviderHealth(n, s),
      listProviderHealth: (s) => inner.listProviderHealth(s),
      deleteProviderHealth: (n, s) => inner.deleteProviderHealth(n, s),
      updateProviderHealth: (n, u, s) => {
        if (failures-- > 0) return Promise.reject(new EgressError('ERR_TEST_WRITE', 'status store unavailable', { retryable: true }));
        return inner.updateProviderHealth(n, u, s);
      },
    }));
    const failedOnce = once(publisher.worker, 'failed');
    const completed = once(publisher.worker, 'completed');
    await results.add('result', result('2026-11-01T10:00:00.000Z', true), { jobId: 'flaky' });
    await failedOnce;
    const [job] = (await completed) as [Job];
    expect(job.attemptsMade).toBe(3);
    expect((await store.getProviderHealth('local'))?.status.ready).toBe(true);
  });

  test('results for providers no longer configured are dropped; malformed results fail without retries', async () => {
    const { store, results, publisher, processed } = await setup();
    const done = processed();
    await results.add('result', { ...result('2026-11-01T10:00:00.000Z', true), provider: 'removed' }, { jobId: 'stale' });
    await done;
    expect(await store.getProviderHealth('removed')).toBeUndefined();
    const failed = once(publisher.worker, 'failed');
    await results.add('result', { provider: 'local', targets: 'nope' }, { jobId: 'garbage' });
    const [job, err] = (await failed) as [Job, Error];
    expect(err.message).toMatch(/^invalid results job data: /);
    expect(job.attemptsMade).toBe(1);
    expect(await job.getState()).toBe('failed');
  });
});
