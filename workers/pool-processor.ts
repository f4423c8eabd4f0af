import { QUEUES } from '../queues/names.ts';
import type { Logger } from '../src/logging.ts';
import { poolOf, reconcilePool, type PoolReconcileDeps, type PoolReconcileOutcome } from '../src/pools/reconcile-pool.ts';
import type { ProxyReader } from '../src/store/proxy-store.ts';
import type { WorkRequests } from '../src/work/work-requests.ts';
import { JOBS } from '../src/work/jobs.ts';
import { handleWork, type WorkJobHandler } from './consumer.ts';

export interface PoolProcessorDeps extends Omit<PoolReconcileDeps, 'requestReconcile'> {
  logger: Logger;
  requestReconcile: (proxy: string) => Promise<void>;
}

/**
 * Handles `pool-reconcile` (one pool, under the job's deadline) and `pool-look` (a delayed look
 * that asks for the pool's deduplicated reconcile when it comes due). A pool reconcile never goes
 * back to delayed: while waiting on members it completes and relies on their readiness changes
 * (`memberChanged`) and, as a safety net, on a delayed look.
 */
export function poolHandlers(deps: PoolProcessorDeps): WorkJobHandler[] {
  const reconcile = handleWork(JOBS.poolReconcile, async (data, ctx): Promise<Omit<PoolReconcileOutcome, 'status'>> => {
    const log = deps.logger.child({ jobId: ctx.job.id, queue: QUEUES.reconcile, pool: data.pool });
    const outcome = await ctx.deadline((limit) => reconcilePool(data.pool, deps, limit));
    if (outcome.kind === 'reconciled') {
      if (outcome.lookAfterMs !== undefined) await ctx.work.lookAtPool(data.pool, outcome.lookAfterMs);
      const { desired, current, ready, rotating, failed } = outcome.status;
      log.info({ created: outcome.created, deleted: outcome.deleted, desired, current, ready, rotating, failed }, 'reconciled pool');
    } else log.info({ outcome: outcome.kind }, 'reconciled pool');
    if (outcome.kind !== 'reconciled') return outcome;
    const { status: _stored, ...summary } = outcome;
    return summary;
  });
  const look = handleWork(JOBS.poolLook, async (data, ctx): Promise<void> => {
    await ctx.work.reconcilePool(data.pool);
  });
  return [reconcile, look];
}

/**
 * What an eviction outside reconcile (the probe loop, a local process exiting) asks for: the
 * proxy's reconcile and, for a pool member, its pool's, so the pool's status follows at once.
 */
export function reconcileAfterEviction(work: Pick<WorkRequests, 'reconcileProxy' | 'reconcilePool'>, proxies: ProxyReader): (proxy: string) => Promise<void> {
  return async (proxy) => {
    await work.reconcileProxy(proxy);
    const member = await proxies.get(proxy);
    const pool = member ? poolOf(member) : undefined;
    if (pool !== undefined) await work.reconcilePool(pool);
  };
}
