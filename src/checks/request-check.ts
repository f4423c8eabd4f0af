import type { Queue, QueueEvents } from 'bullmq';
import { enqueue } from '../../queues/jobs.ts';
import { EgressError } from '../errors.ts';
import { JOBS } from '../work/jobs.ts';
import { checkResultSchema, type CheckResultData } from '../health/check-result.ts';

/** The dedup id that coalesces "check this provider now" requests while one is waiting. */
export function checkNowDedupId(provider: string): string {
  return `check-now-${provider}`;
}

export class CheckFailedError extends EgressError {
  constructor(jobId: string, reason: string) {
    super('ERR_CHECK_FAILED', `check job ${jobId} failed: ${reason}`);
  }
}

export class CheckWaitTimeoutError extends EgressError {
  constructor(jobId: string, cause: unknown) {
    super('ERR_CHECK_WAIT_TIMEOUT', `check job ${jobId} did not finish in time (are workers running for the checks queue?)`, {
      retryable: true,
      cause,
    });
  }
}

const NOT_STARTED = new Set(['waiting', 'prioritized', 'delayed']);

/**
 * Enqueues an ad-hoc check. While the scheduler's "check now" job for the provider has not
 * started yet, the request joins it (its result will be at least as fresh as the request);
 * a check that is already running is never joined, since it may have read the world before
 * the request was made.
 */
export async function requestCheck(checks: Queue, provider: string): Promise<string> {
  const pending = await checks.getDeduplicationJobId(checkNowDedupId(provider));
  if (pending && NOT_STARTED.has(await checks.getJobState(pending))) return pending;
  const job = await enqueue(checks, JOBS.check, { provider, trigger: 'adhoc' });
  return job.id ?? '';
}

/**
 * Waits for a check job's result, until `signal` ends. Subscribes to the queue's events
 * before reading the job's state, so a job that finishes in between is not missed.
 */
export async function waitForCheck(checks: Queue, events: QueueEvents, jobId: string, signal: AbortSignal): Promise<CheckResultData> {
  let cleanup = (): void => undefined;
  const finished = new Promise<unknown>((resolve, reject) => {
    const onCompleted = (args: { jobId: string; returnvalue: unknown }): void => {
      if (args.jobId === jobId) resolve(args.returnvalue);
    };
    const onFailed = (args: { jobId: string; failedReason: string }): void => {
      if (args.jobId === jobId) reject(new CheckFailedError(jobId, args.failedReason));
    };
    const onAbort = (): void => reject(new CheckWaitTimeoutError(jobId, signal.reason));
    events.on('completed', onCompleted);
    events.on('failed', onFailed);
    signal.addEventListener('abort', onAbort, { once: true });
    cleanup = () => {
      events.off('completed', onCompleted);
      events.off('failed', onFailed);
      signal.removeEventListener('abort', onAbort);
    };
  });
  finished.catch(() => undefined);
  try {
    signal.throwIfAborted();
    // State first, then the job: a job fetched before its state was read may be stale.
    const state = await checks.getJobState(jobId);
    if (state === 'unknown') throw new CheckFailedError(jobId, 'the job is gone (removed before it could be awaited)');
    if (state === 'completed' || state === 'failed') {
      const job = await checks.getJob(jobId);
      if (!job) throw new CheckFailedError(jobId, 'the job is gone (removed before it could be awaited)');
      if (state === 'failed') throw new CheckFailedError(jobId, job.failedReason);
      return checkResultSchema.parse(job.returnvalue);
    }
    const value = await finished;
    return checkResultSchema.parse(typeof value === 'string' ? JSON.parse(value) : value);
  } finally {
    cleanup();
  }
}
