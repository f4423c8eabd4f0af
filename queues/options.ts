import type { DefaultJobOptions } from 'bullmq';

export interface JobOptionSettings {
  backoffMs: number;
  retention: { completed: number; failed: number };
}

/**
 * Default job options: a few attempts with exponential backoff and jitter (for infrastructure
 * errors: Redis hiccups, a failed write), and bounded retention so Redis does not grow forever.
 */
export function defaultJobOptions(settings: JobOptionSettings): DefaultJobOptions {
  return {
    attempts: 5,
    backoff: { type: 'exponential', delay: settings.backoffMs, jitter: 0.5 },
    removeOnComplete: { count: settings.retention.completed, age: 24 * 3600 },
    removeOnFail: { count: settings.retention.failed, age: 7 * 24 * 3600 },
  };
}
