import type { Worker } from 'bullmq';
import type { Logger } from '../logging.ts';

function delay(ms: number): Promise<'timeout'> {
  return new Promise((resolve) => setTimeout(() => resolve('timeout'), ms).unref());
}

/**
 * Bounded two-stage close of a BullMQ worker: stop fetching and wait up to `graceMs` for
 * running jobs; then abort their signals and wait a little more; then force. A job still
 * hanging after that is recovered by another worker's stalled-job check.
 */
export async function closeWorkerBounded(worker: Worker, graceMs: number, logger: Logger): Promise<void> {
  const closing = worker.close();
  closing.catch(() => undefined);
  if ((await Promise.race([closing.then(() => 'closed' as const), delay(graceMs)])) === 'closed') return;
  logger.warn({ queue: worker.name, graceMs }, 'jobs still running after the grace period: aborting them');
  worker.cancelAllJobs('shutdown');
  if ((await Promise.race([closing.then(() => 'closed' as const), delay(Math.min(graceMs, 5000))])) === 'closed') return;
  logger.warn({ queue: worker.name }, 'jobs ignored the abort: closing without waiting; the stalled check will requeue them');
  await worker.close(true).catch(() => undefined);
}
