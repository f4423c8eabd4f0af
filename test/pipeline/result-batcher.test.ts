import { Queue } from 'bullmq';
import { afterEach, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import { createResultBatcher } from '../../workers/result-batcher.ts';
import { uniquePrefix } from '../support/config.ts';
import type { CheckResultData } from '../../src/health/check-result.ts';

const queues: Queue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) {
    await q.obliterate({ force: true }).catch(() => undefined);
    await q.close();
  }
});

function resultsQueue(): Queue {
  const q = new Queue(QUEUES.results, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix: uniquePrefix() });
  queues.push(q);
  return q;
}

function result(checkJobId: string): CheckResultData {
  return {
    provider: 'local',
    checkJobId,
    checkedAt: '2026-11-29T10:00:00.000Z',
    targets: [{ target: 'localhost', ready: true, reason: 'Ok', message: 'ok', details: {}, durationSeconds: 0 }],
  };
}

describe('check results onto the results queue (group commit)', () => {
  test('a result alone is one `result` job named after its check job', async () => {
    const q = resultsQueue();
    await createResultBatcher(q).publish(result('42'));
    const jobs = await q.getJobs(['waiting']);
    expect(jobs.map((j) => [j.name, j.id])).toEqual([['result', 'result-42']]);
    expect(jobs[0]?.data).toEqual(result('42'));
  });

  test('results published together go out as one `results` job, in order, and every publish settles after it is stored', async () => {
    const q = resultsQueue();
    const sink = createResultBatcher(q);
    await Promise.all(['1', '2', '3'].map((id) => sink.publish(result(id))));
    const jobs = await q.getJobs(['waiting']);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]?.name).toBe('results');
    expect((jobs[0]?.data as { results: CheckResultData[] }).results.map((r) => r.checkJobId)).toEqual(['1', '2', '3']);
  });

  test('results published while an add is in flight wait for it, then share the next job; maxBatch bounds a job', async () => {
    const q = resultsQueue();
    const sink = createResultBatcher(q, { maxBatch: 2 });
    const first = sink.publish(result('a'));
    await new Promise((resolve) => setImmediate(resolve)); // the first add is now in flight
    await Promise.all([first, ...['b', 'c', 'd'].map((id) => sink.publish(result(id)))]);
    const batches = (await q.getJobs(['waiting']))
      .map((j) =>
        j.name === 'result' ? [(j.data as CheckResultData).checkJobId] : (j.data as { results: CheckResultData[] }).results.map((r) => r.checkJobId),
      )
      .sort((x, y) => (x[0] ?? '').localeCompare(y[0] ?? ''));
    // 'a' went alone; 'b', 'c', 'd' waited for it and left in jobs of at most two.
    expect(batches).toEqual([['a'], ['b', 'c'], ['d']]);
  });

  test('a failed add rejects every publish of its batch: no result is acknowledged before it is stored', async () => {
    const q = resultsQueue();
    const sink = createResultBatcher(q);
    await q.close();
    const settled = await Promise.allSettled(['x', 'y'].map((id) => sink.publish(result(id))));
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected']);
  });
});
