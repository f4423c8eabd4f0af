import { Counter, Histogram, type Registry } from 'prom-client';

export type JobOutcome = 'completed' | 'failed' | 'retried' | 'timeout';

export interface JobMetrics {
  observe(queue: string, outcome: JobOutcome, seconds: number): void;
  /** Time from when a job was due (added, or its delay ended) to the start of its first run. */
  observeWait(queue: string, seconds: number): void;
}

export function createJobMetrics(registry: Registry): JobMetrics {
  const duration = new Histogram({
    name: 'proxy_operator_job_duration_seconds',
    help: 'How long jobs ran, by queue and outcome.',
    labelNames: ['queue', 'outcome'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const outcomes = new Counter({
    name: 'proxy_operator_jobs_total',
    help: 'Jobs processed, by queue and outcome.',
    labelNames: ['queue', 'outcome'],
    registers: [registry],
  });
  const wait = new Histogram({
    name: 'proxy_operator_job_wait_seconds',
    help: 'Time from a job being due (added, or its delay or schedule ended) to the start of its first run, by queue.',
    labelNames: ['queue'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
    registers: [registry],
  });
  // Label children looked up once per label set: a lookup by labels hashes them on every call.
  const finished = new Map<string, { duration: Histogram.Internal<'queue' | 'outcome'>; outcomes: Counter.Internal }>();
  const waits = new Map<string, Histogram.Internal<'queue'>>();
  return {
    observe(queue, outcome, seconds) {
      const key = `${queue}\0${outcome}`;
      let child = finished.get(key);
      if (!child) {
        child = { duration: duration.labels({ queue, outcome }), outcomes: outcomes.labels({ queue, outcome }) };
        finished.set(key, child);
      }
      child.duration.observe(seconds);
      child.outcomes.inc();
    },
    observeWait(queue, seconds) {
      let child = waits.get(queue);
      if (!child) {
        child = wait.labels({ queue });
        waits.set(queue, child);
      }
      child.observe(Math.max(0, seconds));
    },
  };
}
