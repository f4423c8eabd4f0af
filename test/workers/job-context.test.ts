/**
 * A running job's context (queues/job-context.ts): its own signal follows the consumer's
 * cancellation only while the job runs, and a job that never reads it makes none.
 */
import { getEventListeners } from 'node:events';
import type { Job } from 'bullmq';
import { describe, expect, test } from 'vitest';
import { RunningJob } from '../../queues/job-context.ts';

const job = { id: '1', name: 'check' } as Job;

describe('RunningJob', () => {
  test('its signal is made when first read, follows the cancellation, and stops listening when the job ends', () => {
    const cancellation = new AbortController();
    const ctx = new RunningJob(job, undefined, cancellation.signal, undefined);
    expect(getEventListeners(cancellation.signal, 'abort')).toHaveLength(0);
    const signal = ctx.signal;
    expect(ctx.signal).toBe(signal);
    expect(getEventListeners(cancellation.signal, 'abort')).toHaveLength(1);
    ctx.release();
    expect(getEventListeners(cancellation.signal, 'abort')).toHaveLength(0);
    cancellation.abort('shutdown');
    expect(signal.aborted).toBe(false);
  });

  test('a signal read after the job ended does not listen; one read under a cancelled consumer is ended already', () => {
    const cancellation = new AbortController();
    const ended = new RunningJob(job, undefined, cancellation.signal, undefined);
    ended.release();
    expect(ended.signal.aborted).toBe(false);
    expect(getEventListeners(cancellation.signal, 'abort')).toHaveLength(0);
    cancellation.abort('shutdown');
    const late = new RunningJob(job, undefined, cancellation.signal, undefined);
    expect(late.signal.reason).toBe('shutdown');
    expect(late.cancelled()).toEqual({ reason: 'shutdown' });
  });

  test('deadline() hands the work its source’s signal, or the job’s own without one', async () => {
    const cancellation = new AbortController();
    const window = new AbortController().signal;
    const withSource = new RunningJob(job, undefined, cancellation.signal, { signal: () => window });
    expect(await withSource.deadline((s) => Promise.resolve(s))).toBe(window);
    const without = new RunningJob(job, undefined, cancellation.signal, undefined);
    expect(await without.deadline((s) => Promise.resolve(s))).toBe(without.signal);
  });
});
