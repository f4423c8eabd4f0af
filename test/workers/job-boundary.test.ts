import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { Queue, type Job } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { redisOptions } from '../../queues/connection.ts';
import { consume, handle, openQueue, waitSeconds, type Consumer, type JobObserver } from '../../queues/consume.ts';
import { enqueue, type JobDefinition } from '../../queues/jobs.ts';
import { QUEUES } from '../../queues/names.ts';
import { LookAgainLater, retryVerdict } from '../../queues/retry.ts';
import { SharedDeadlines } from '../../src/abort.ts';
import type { AppConfig } from '../../src/config/app.ts';
import { DeadlineError, EgressError } from '../../src/errors.ts';
import { silentLogger } from '../../src/logging.ts';
import { testConfig } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';

describe('retry decisions are data on the error', () => {
  const final = new EgressError('ERR_X', 'no', { retryable: false });
  const retry = new EgressError('ERR_Y', 'again', { retryable: true });
  test.each([
    ['an EgressError that says it cannot be retried', final, { kind: 'final' }],
    ['an EgressError that says it can', retry, { kind: 'retry' }],
    ['an EgressError without a say (retried: the one default)', new EgressError('ERR_Z', 'z'), { kind: 'retry' }],
    ['a plain Error wrapping a final one', new Error('wrapped', { cause: final }), { kind: 'final' }],
    ['the nearest flag wins', new EgressError('ERR_W', 'outer', { retryable: true, cause: final }), { kind: 'retry' }],
    ['a deadline', new DeadlineError('late'), { kind: 'retry' }],
    ['an error that says nothing (a Redis hiccup)', new Error('ECONNRESET'), { kind: 'retry' }],
    ['something not an Error', 'a string', { kind: 'retry' }],
    ['look again later', new LookAgainLater(250, 'starting'), { kind: 'later', delayMs: 250 }],
  ])('%s', (_what, err, verdict) => {
    expect(retryVerdict(err)).toEqual(verdict);
  });
});

describe('the wait of a job is counted from when it was due', () => {
  const job = (o: Partial<Pick<Job, 'timestamp' | 'opts' | 'processedOn' | 'attemptsStarted'>>) => ({
    timestamp: 1_000_000,
    opts: {},
    processedOn: 1_000_040,
    attemptsStarted: 1,
    ...o,
  });
  test('a job added for now: from when it was added', () => {
    expect(waitSeconds(job({}))).toBeCloseTo(0.04, 6);
  });
  test('a delayed or scheduled job (BullMQ zeroed `delay` when it promoted it): from the end of its delay', () => {
    expect(waitSeconds(job({ opts: { delay: 60_000 }, processedOn: 1_060_007 }))).toBeCloseTo(0.007, 6);
  });
  test('later runs (a retry, a look-again-later, a stalled job) are not counted; a job not started has no wait', () => {
    expect(waitSeconds(job({ attemptsStarted: 2 }))).toBeUndefined();
    expect(waitSeconds(job({ processedOn: undefined }))).toBeUndefined();
  });
});

/** A new EgressError subclass whose author forgot the retryable flag: retried like any error that says nothing. */
class ForgotTheFlag extends EgressError {
  constructor() {
    super('ERR_FORGOT', 'a failure nobody classified');
  }
}

/** Records what consume reports, for the assertions. */
function recorder(): JobObserver & { outcomes: string[]; waits: number[] } {
  const outcomes: string[] = [];
  const waits: number[] = [];
  return { outcomes, waits, observe: (_q, outcome) => void outcomes.push(outcome), observeWait: (_q, s) => void waits.push(s) };
}

describe('consume and enqueue on a real Redis', () => {
  let config: AppConfig;
  let queue: Queue;
  const consumers: Consumer[] = [];
  const calls = new Map<string, number>();
  /** The consumer's work port as the handlers see it: they record each job they asked more work for. */
  const work = { asked: [] as string[] };

  const verdictJob = {
    queue: QUEUES.checks,
    name: 'verdict',
    schema: z.strictObject({ id: z.string(), throws: z.enum(['final', 'retryable', 'plain', 'unflagged', 'later-once', 'nothing']) }),
    attempts: 3,
  } satisfies JobDefinition;

  const waitsJob = { queue: QUEUES.checks, name: 'waits', schema: z.strictObject({ id: z.string() }), attempts: 1 } satisfies JobDefinition;
  /** What the `waits` jobs saw: the signal each read, and what `cancelled()` said once it ended. */
  const waited = new Map<string, { signal: AbortSignal; cancelled: { reason: unknown } | undefined; started: () => void }>();
  const startedWaiting = (id: string): Promise<void> =>
    new Promise((resolve) => waited.set(id, { signal: new AbortController().signal, cancelled: undefined, started: resolve }));

  async function start(observer: JobObserver): Promise<void> {
    const consumer = await consume(
      QUEUES.checks,
      [
        handle<typeof waitsJob, typeof work>(waitsJob, async (data, ctx) => {
          const seen = waited.get(data.id);
          if (!seen) throw new Error(`no waiter for ${data.id}`);
          seen.signal = ctx.signal;
          seen.started();
          // `quick` ends at once; any other waits for its signal (the consumer's close, after the grace period).
          if (data.id !== 'quick') await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
          seen.cancelled = ctx.cancelled();
          return data.id;
        }),
        handle<typeof verdictJob, typeof work>(verdictJob, async (data, ctx) => {
          const n = (calls.get(data.id) ?? 0) + 1;
          calls.set(data.id, n);
          if (data.throws === 'final') throw new EgressError('ERR_FORBIDDEN', 'HTTP 403: forbidden', { retryable: false });
          if (data.throws === 'retryable') throw new EgressError('ERR_BUSY', 'busy', { retryable: true });
          if (data.throws === 'plain') throw new Error('socket hang up');
          if (data.throws === 'unflagged') throw new ForgotTheFlag();
          if (data.throws === 'later-once' && n === 1) throw new LookAgainLater(1, 'still starting');
          if (data.throws === 'nothing') ctx.work.asked.push(data.id);
          return { id: data.id, run: n, deadlineSignal: ctx.signal.aborted };
        }),
      ],
      {
        work,
        connection: redisOptions(config.redis.url ?? '', 'worker'),
        prefix: config.redis.prefix,
        settings: config,
        concurrency: 4,
        lockDurationMs: 5000,
        stalledIntervalMs: 5000,
        graceMs: 1000,
        observer,
        logger: silentLogger(),
        deadlines: (cancellation, ms) => new SharedDeadlines(ms, 50, undefined, cancellation),
      },
    );
    consumers.push(consumer);
  }

  beforeAll(() => {
    config = testConfig({ dataDir: join(tmpdir(), 'job-boundary-unused') });
    queue = openQueue(QUEUES.checks, {
      connection: redisOptions(config.redis.url ?? '', 'producer'),
      prefix: config.redis.prefix,
      settings: { ...config, backoffMs: 1 },
      logger: silentLogger(),
    });
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.close()));
  });
  afterAll(async () => {
    await queue.obliterate({ force: true });
    await queue.close();
  });

  const settled = (job: Job): Promise<Job> =>
    waitFor(`job ${job.id ?? ''} settled`, async () => {
      const state = await queue.getJobState(job.id ?? '');
      return state === 'completed' || state === 'failed' ? ((await queue.getJob(job.id ?? '')) ?? false) : false;
    });

  test('an error that says a retry cannot help fails its job once, whatever attempts are left', async () => {
    const observer = recorder();
    await start(observer);
    const job = await settled(await enqueue(queue, verdictJob, { id: 'final', throws: 'final' }));
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(1);
    expect(calls.get('final')).toBe(1);
    expect(job.failedReason).toBe('HTTP 403: forbidden');
    await waitFor('the failure counted', () => observer.outcomes.includes('failed'));
    expect(observer.outcomes).toEqual(['failed']);
  });

  test.each(['retryable', 'plain', 'unflagged'] as const)('a %s error is retried with backoff until the attempts are spent', async (throws) => {
    const observer = recorder();
    await start(observer);
    const job = await settled(await enqueue(queue, verdictJob, { id: throws, throws }));
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(3);
    expect(calls.get(throws)).toBe(3);
    await waitFor('three outcomes counted', () => observer.outcomes.length === 3);
    expect(observer.outcomes).toEqual(['retried', 'retried', 'failed']);
  });

  test('"look again later" puts the same job back as delayed; its next run completes it', async () => {
    await start(recorder());
    const added = await enqueue(queue, verdictJob, { id: 'later', throws: 'later-once' });
    const job = await settled(added);
    expect(job.id).toBe(added.id);
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toMatchObject({ id: 'later', run: 2 });
  });

  test('close aborts a running job’s signal after the grace period, saying why; a job that had ended keeps its signal whole', async () => {
    await start(recorder());
    const quickStarted = startedWaiting('quick');
    const quick = await queue.add('waits', { id: 'quick' });
    await quickStarted;
    await settled(quick);
    const hangingStarted = startedWaiting('hangs');
    await queue.add('waits', { id: 'hangs' });
    await hangingStarted;
    await consumers.splice(0)[0]?.close();
    expect(waited.get('hangs')?.signal.aborted).toBe(true);
    expect(waited.get('hangs')?.signal.reason).toBe('shutdown');
    expect(waited.get('hangs')?.cancelled).toEqual({ reason: 'shutdown' });
    expect(waited.get('quick')?.signal.aborted).toBe(false);
    expect(waited.get('quick')?.cancelled).toBeUndefined();
  });

  test('a payload that does not match its schema, or a job name nobody handles, fails at once and never reaches a handler', async () => {
    await start(recorder());
    const bad = await settled(await queue.add(verdictJob.name, { id: 'bad', throws: 'sometimes' }, { attempts: 3 }));
    expect(bad.attemptsMade).toBe(1);
    expect(bad.failedReason).toMatch(/^invalid checks job data: throws: /);
    expect(calls.has('bad')).toBe(false);
    const stray = await settled(await queue.add('stray', { id: 'stray' }, { attempts: 3 }));
    expect(stray.attemptsMade).toBe(1);
    expect(stray.failedReason).toBe('no handler for "stray" jobs on the checks queue');
  });

  test('enqueue validates the payload and refuses another queue', async () => {
    await expect(enqueue(queue, verdictJob, { id: 'x', throws: 'never' as 'final' })).rejects.toMatchObject({ code: 'ERR_JOB_DATA', retryable: false });
    const other = new Queue(QUEUES.gc, { connection: redisOptions(config.redis.url ?? '', 'producer'), prefix: config.redis.prefix });
    try {
      await expect(enqueue(other, verdictJob, { id: 'x', throws: 'nothing' })).rejects.toThrow('a verdict job belongs on the checks queue, not gc');
    } finally {
      await other.close();
    }
  });

  test('a handler asks for more work through its context: the work port its consumer was given', async () => {
    await start(recorder());
    const job = await settled(await enqueue(queue, verdictJob, { id: 'asks', throws: 'nothing' }));
    expect(await job.getState()).toBe('completed');
    expect(work.asked).toContain('asks');
  });

  test('a delayed job waited from the end of its delay, not from when it was added', async () => {
    const observer = recorder();
    await start(observer);
    const job = await settled(await enqueue(queue, verdictJob, { id: 'delayed', throws: 'nothing' }, { delay: 300 }));
    await waitFor('its wait counted', () => observer.waits.length === 1);
    const processedOn = job.processedOn ?? Number.NaN;
    expect(job.opts.delay).toBe(300);
    // Exactly the time from due to start: with the delay counted it would be 0.3 s more.
    expect(observer.waits[0]).toBeCloseTo((processedOn - job.timestamp - 300) / 1000, 6);
  });

  test('a job scheduler’s jobs waited from when each was due', async () => {
    const observer = recorder();
    await start(observer);
    await queue.upsertJobScheduler('verdict-every', { every: 250 }, { name: verdictJob.name, data: { id: 'scheduled', throws: 'nothing' } });
    try {
      await waitFor('two scheduled runs', () => (calls.get('scheduled') ?? 0) >= 2);
    } finally {
      await queue.removeJobScheduler('verdict-every');
    }
    // Every job the scheduler made has run (removing it took its next, delayed job with it).
    const done = await waitFor('every scheduled job finished', async () => {
      const pending = await queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized');
      if (Object.values(pending).some((n) => n > 0)) return false;
      const jobs = (await queue.getJobs(['completed'])).filter((j) => (j.data as { id?: string }).id === 'scheduled');
      return jobs.length === calls.get('scheduled') && observer.waits.length === jobs.length ? jobs : false;
    });
    expect(done.some((j) => (j.opts.delay ?? 0) > 0)).toBe(true);
    const expected = done.map((j) => ((j.processedOn ?? Number.NaN) - j.timestamp - (j.opts.delay ?? 0)) / 1000).sort((a, b) => a - b);
    expect([...observer.waits].sort((a, b) => a - b)).toEqual(expected.map((e): unknown => expect.closeTo(e, 6)));
  });
});
