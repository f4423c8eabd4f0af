import type { Queue } from 'bullmq';
import { enqueue, JOBS } from '../../queues/jobs.ts';

/**
 * Asks for a reconcile of one pool, deduplicated per pool with keepLastIfActive like proxy
 * reconciles (`pool-reconcile-<name>`; proxy reconciles' ids start `reconcile-`, so they never clash).
 */
export async function requestPoolReconcile(reconcile: Queue, pool: string): Promise<void> {
  await enqueue(reconcile, JOBS.poolReconcile, { pool }, { deduplication: { id: `pool-reconcile-${pool}`, keepLastIfActive: true } });
}
