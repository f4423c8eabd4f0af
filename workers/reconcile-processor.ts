import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import { parseJobData, reconcileJobSchema } from '../queues/jobs.ts';
import { QUEUES } from '../queues/names.ts';
import type { Logger } from '../src/logging.ts';
import { reconcileProxy, type ReconcileDeps, type ReconcileOutcome } from '../src/proxies/reconcile.ts';

export interface ReconcileProcessorDeps extends ReconcileDeps {
  logger: Logger;
  /** Deadline of one reconcile (job signal combined with it). */
  timeoutMs: number;
  /** How soon a proxy whose instance is still starting or being deleted is looked at again. */
  recheckMs: number;
}

/**
 * Processes one `reconcile` job. "Look again later" is not a failure: the same job is moved
 * back to delayed (so its deduplication id keeps coalescing changes meanwhile). Errors that
 * are not a verdict (a provider API down) throw and are retried with backoff.
 * Three parameters: BullMQ creates the job's AbortSignal only for such processors.
 */
export function createReconcileProcessor(deps: ReconcileProcessorDeps) {
  return async function processReconcile(job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<ReconcileOutcome> {
    let data;
    try {
      data = parseJobData(reconcileJobSchema, QUEUES.reconcile, job.data);
    } catch (err) {
      throw new UnrecoverableError((err as Error).message);
    }
    const log = deps.logger.child({ jobId: job.id, queue: QUEUES.reconcile, proxy: data.proxy });
    const deadline = AbortSignal.timeout(deps.timeoutMs);
    const outcome = await reconcileProxy(data.proxy, deps, signal ? AbortSignal.any([signal, deadline]) : deadline);
    log.info({ outcome: outcome.kind, ...('why' in outcome ? { why: outcome.why } : {}), ...('message' in outcome ? { message: outcome.message } : {}) }, 'reconciled proxy');
    if (outcome.kind === 'retry-later') {
      await job.moveToDelayed(Date.now() + deps.recheckMs, token);
      throw new DelayedError();
    }
    return outcome;
  };
}
