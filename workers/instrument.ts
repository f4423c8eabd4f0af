import type { Job, Worker } from 'bullmq';
import type { Logger } from '../src/logging.ts';
import type { JobMetrics } from '../src/metrics/job-metrics.ts';

function seconds(from: number | undefined, to: number | undefined): number {
  return from !== undefined && to !== undefined ? Math.max(0, (to - from) / 1000) : 0;
}

/** Job duration and outcome metrics and logs for one worker; also the mandatory error listener. */
export function instrumentWorker(worker: Worker, metrics: JobMetrics, logger: Logger): void {
  const queue = worker.name;
  worker.on('active', (job: Job) => {
    const due = Math.max(job.timestamp + (job.delay ?? 0), job.timestamp);
    metrics.observeWait(queue, ((job.processedOn ?? Date.now()) - due) / 1000);
  });
  worker.on('completed', (job: Job) => {
    metrics.observe(queue, 'completed', seconds(job.processedOn, job.finishedOn));
  });
  worker.on('failed', (job: Job | undefined, err: Error) => {
    if (!job) return;
    const final = job.attemptsMade >= (job.opts.attempts ?? 1) || err.name === 'UnrecoverableError';
    metrics.observe(queue, final ? 'failed' : 'retried', seconds(job.processedOn, job.finishedOn ?? Date.now()));
    logger.warn({ jobId: job.id, queue, attemptsMade: job.attemptsMade, final, err: err.message }, final ? 'job failed' : 'job failed; will retry');
  });
  worker.on('stalled', (jobId: string) => logger.warn({ jobId, queue }, 'job stalled: its worker went away; requeued'));
  worker.on('error', (err: Error) => logger.error({ queue, err: err.message }, 'worker error'));
}
