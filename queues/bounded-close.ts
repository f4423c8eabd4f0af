import type { Worker } from 'bullmq';
import type { JobLog } from './log.ts';

function delay(ms: number): Promise<'timeout'> {
  return new Promise((resolve) => setTimeout(() => resolve('timeout'), ms).unref());
}

/**
 * Bounded two-stage close of a BullMQ worker: stop fetching and wait up to `graceMs` for
 * running jobs; then abort their signals and wait a little more; then force. A job still
 * hanging after that is recovered by another worker's stalled-job check.
 */
export async function closeWorkerBounded(worker: Worker, graceMs: number, logger: JobLog): Promise<void> {
  const closing = worker.close();
  closing.catch(() => undefined);
  if ((await Promise.race([closing.then(() => 'closed' as const), delay(graceMs)])) === 'closed') return;
  logger.warn({ queue: worker.name, graceMs }, 'jobs still running after the grace period: aborting them');
  worker.cancelAllJobs('shutdown');
  if ((await Promise.race([closing.then(() => 'closed' as const), delay(Math.min(graceMs, 5000))])) === 'closed') return;
  logger.warn({ queue: worker.name }, 'jobs ignored the abort: closing without waiting; the stalled check will requeue them');
  const forced = worker.close(true).then(
    () => 'closed' as const,
    () => 'closed' as const,
  );
  if ((await Promise.race([forced, delay(FORCE_CLOSE_MS)])) === 'closed') return;
  // Seen on a Redis Cluster right after a master died: BullMQ's close can wait for good on a
  // blocking command to a node that is gone. Drop the connections instead.
  logger.warn({ queue: worker.name }, 'the worker did not close: dropping its Redis connections');
  await Promise.race([worker.disconnect().catch(() => undefined), delay(FORCE_CLOSE_MS)]);
}

/** How long a forced close may take before the worker's connections are dropped. */
const FORCE_CLOSE_MS = 3000;
