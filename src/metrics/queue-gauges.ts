import { Gauge, type Registry } from 'prom-client';
import type { Queue } from 'bullmq';

const STATES = ['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting', 'waiting-children'] as const;

/** BullMQ's own queue counts under BullMQ's own metric name, read at scrape time. */
export function registerQueueGauges(registry: Registry, queues: readonly Queue[]): void {
  new Gauge({
    name: 'bullmq_job_count',
    help: 'Number of jobs in the queue by state.',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const queue of queues) {
        const counts = await queue.getJobCounts(...STATES);
        for (const state of STATES) this.set({ queue: queue.name, state }, counts[state] ?? 0);
      }
    },
  });
}
