import type { Queue } from 'bullmq';
import { enqueue } from '../../queues/jobs.ts';
import { JOBS } from '../work/jobs.ts';

/**
 * Asks for a reconcile of one proxy. Deduplicated per proxy with keepLastIfActive: a burst of
 * changes runs at most one active job plus one follow-up (a reconcile reads the latest state
 * anyway: the job carries only the name).
 */
export async function requestReconcile(reconcile: Queue, proxy: string): Promise<void> {
  await enqueue(reconcile, JOBS.reconcile, { proxy }, { deduplication: { id: `reconcile-${proxy}`, keepLastIfActive: true } });
}
