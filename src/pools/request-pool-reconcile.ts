import type { Queue } from 'bullmq';
import { enqueue } from '../../queues/jobs.ts';
import { JOBS } from '../work/jobs.ts';

/**
 * Asks for a reconcile of one pool, deduplicated per pool with keepLastIfActive like proxy
 * reconciles (`pool-reconcile-<name>`; proxy reconciles' ids start `reconcile-`, so they never clash).
 */
export async function requestPoolReconcile(reconcile: Queue, pool: string): Promise<void> {
  await enqueue(reconcile, JOBS.poolReconcile, { pool }, { deduplication: { id: `pool-reconcile-${pool}`, keepLastIfActive: true } });
}

/**
 * Asks for a look at one pool in `delayMs` (a member reaching maxAge): a delayed `pool-look` job that
 * then asks for the pool's reconcile. Its id names the pool and the second it comes due, so
 * reconciles that compute the same due time add it once, while one due earlier is still added.
 * The reconcile itself is never delayed: its deduplication would swallow immediate requests meanwhile.
 */
export async function requestPoolLook(reconcile: Queue, pool: string, delayMs: number, now: number = Date.now()): Promise<void> {
  const due = Math.ceil((now + delayMs) / 1000);
  await enqueue(reconcile, JOBS.poolLook, { pool }, { jobId: `pool-look-${pool}-${due}`, delay: Math.max(0, due * 1000 - now) });
}
