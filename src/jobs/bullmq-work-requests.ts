import type { Queue, QueueEvents } from 'bullmq';
import { enqueue } from '../../queues/jobs.ts';
import { CheckFailedError, CheckWaitTimeoutError } from '../checks/check-errors.ts';
import { checkResultSchema, type CheckResultData } from '../health/check-result.ts';
import { JOBS } from '../work/jobs.ts';
import type { WorkRequests } from '../work/work-requests.ts';

/** The dedup id that coalesces "check this provider now" requests while one is waiting. */
export function checkNowDedupId(provider: string): string {
  return `check-now-${provider}`;
}

/** The queues requests go to: `reconcile` for proxies and pools, `checks` (and its events, to await one) for checks. */
export interface WorkQueues {
  readonly reconcile?: Queue | undefined;
  readonly checks?: Queue | undefined;
  readonly checkEvents?: QueueEvents | undefined;
}

/** A request for work whose queue this process did not open (a programming error, never retried). */
export class NoQueueError extends Error {
  readonly code = 'ERR_NO_QUEUE';
  readonly retryable = false;
  constructor(what: string) {
    super(`cannot ask for ${what}: its queue is not open in this process`);
    this.name = 'NoQueueError';
  }
}

const NOT_STARTED = new Set(['waiting', 'prioritized', 'delayed']);

/** The work-requests port on BullMQ: each request is a job of its declaration (src/work/jobs.ts). */
export class BullmqWorkRequests implements WorkRequests {
  readonly #queues: WorkQueues;

  constructor(queues: WorkQueues) {
    this.#queues = queues;
  }

  /** Deduplicated per proxy with keepLastIfActive: a burst runs at most one active job plus one follow-up. */
  async reconcileProxy(proxy: string): Promise<void> {
    await enqueue(this.#reconcile('a proxy reconcile'), JOBS.reconcile, { proxy }, { deduplication: { id: `reconcile-${proxy}`, keepLastIfActive: true } });
  }

  /** Deduplicated per pool like proxy reconciles (`pool-reconcile-<name>`; proxy reconciles' ids start `reconcile-`, so they never clash). */
  async reconcilePool(pool: string): Promise<void> {
    await enqueue(
      this.#reconcile('a pool reconcile'),
      JOBS.poolReconcile,
      { pool },
      { deduplication: { id: `pool-reconcile-${pool}`, keepLastIfActive: true } },
    );
  }

  /**
   * A delayed `pool-look` job that then asks for the pool's reconcile. Its id names the pool and the
   * second it comes due, so reconciles that compute the same due time add it once, while one due
   * earlier is still added. The reconcile itself is never delayed: its deduplication would swallow
   * immediate requests meanwhile.
   */
  async lookAtPool(pool: string, delayMs: number, now: number = Date.now()): Promise<void> {
    const due = Math.ceil((now + delayMs) / 1000);
    await enqueue(this.#reconcile('a pool look'), JOBS.poolLook, { pool }, { jobId: `pool-look-${pool}-${due}`, delay: Math.max(0, due * 1000 - now) });
  }

  /**
   * While the scheduler's "check now" job for the provider has not started yet, the request joins
   * it (its result will be at least as fresh as the request); a check that is already running is
   * never joined, since it may have read the world before the request was made.
   */
  async checkProvider(provider: string): Promise<string> {
    const checks = this.#checks();
    const pending = await checks.getDeduplicationJobId(checkNowDedupId(provider));
    if (pending && NOT_STARTED.has(await checks.getJobState(pending))) return pending;
    const job = await enqueue(checks, JOBS.check, { provider, trigger: 'adhoc' });
    return job.id ?? '';
  }

  /** Subscribes to the queue's events before reading the job's state, so a job that finishes in between is not missed. */
  async awaitCheck(jobId: string, signal: AbortSignal): Promise<CheckResultData> {
    const checks = this.#checks();
    const events = this.#queues.checkEvents;
    if (!events) throw new NoQueueError('the end of a check');
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

  #reconcile(what: string): Queue {
    const q = this.#queues.reconcile;
    if (!q) throw new NoQueueError(what);
    return q;
  }

  #checks(): Queue {
    const q = this.#queues.checks;
    if (!q) throw new NoQueueError('a check');
    return q;
  }
}
