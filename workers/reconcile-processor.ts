import { DelayedError, UnrecoverableError, type Job, type Queue } from 'bullmq';
import type { ReconcileMetrics } from '../src/metrics/proxy-metrics.ts';
import { requestReconcile } from '../src/proxies/request-reconcile.ts';

/** The name of the periodic job that asks for a reconcile of every proxy. */
export const RESYNC_JOB = 'resync';
import { parseJobData, reconcileJobSchema } from '../queues/jobs.ts';
import { QUEUES } from '../queues/names.ts';
import { withDeadline } from '../src/abort.ts';
import type { Logger } from '../src/logging.ts';
import { reconcileProxy, type ReconcileDeps, type ReconcileOutcome } from '../src/proxies/reconcile.ts';

export interface ReconcileProcessorDeps extends ReconcileDeps {
  logger: Logger;
  /** The queue itself, for the resync job to ask for a reconcile of every proxy. */
  reconcile: Queue;
  metrics?: ReconcileMetrics;
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
  const withHooks: ReconcileDeps = {
    ...deps,
    onProbe: (provider, ok, seconds) => deps.metrics?.probe(provider, ok, seconds),
    onEvicted: (provider, cause, readySeconds) => deps.metrics?.evicted(provider, cause, readySeconds),
    onReplace: (provider) => deps.metrics?.replaced(provider),
  };
  return async function processReconcile(
    job: Job,
    token: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<ReconcileOutcome | { resynced: number }> {
    if (job.name === RESYNC_JOB) {
      // The periodic resync: every proxy gets a reconcile (deduplicated per proxy), which re-probes Ready ones.
      const proxies = await deps.proxies.list(signal);
      for (const p of proxies) await requestReconcile(deps.reconcile, p.name);
      return { resynced: proxies.length };
    }
    let data;
    try {
      data = parseJobData(reconcileJobSchema, QUEUES.reconcile, job.data);
    } catch (err) {
      throw new UnrecoverableError((err as Error).message);
    }
    const log = deps.logger.child({ jobId: job.id, queue: QUEUES.reconcile, proxy: data.proxy });
    const outcome = await withDeadline(signal, deps.timeoutMs, (limit) => reconcileProxy(data.proxy, withHooks, limit));
    deps.metrics?.outcome((await deps.proxies.get(data.proxy))?.spec.provider ?? 'unknown', outcome.kind);
    log.info({ outcome: outcome.kind, ...('why' in outcome ? { why: outcome.why } : {}), ...('message' in outcome ? { message: outcome.message } : {}) }, 'reconciled proxy');
    if (outcome.kind === 'retry-later') {
      await job.moveToDelayed(Date.now() + deps.recheckMs, token);
      throw new DelayedError();
    }
    return outcome;
  };
}
