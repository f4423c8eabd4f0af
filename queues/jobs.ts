import type { Job, JobsOptions, Queue } from 'bullmq';
import type { z } from 'zod';
import type { QueueName } from './names.ts';
import { defaultJobOptions, type JobOptionSettings } from './options.ts';

/** What the job definitions read from the configuration (the frozen AppConfig has all of it). */
export interface JobSettings extends JobOptionSettings {
  checks: { timeoutMs: number };
}

/**
 * One kind of job, defined once: where it goes, what it carries, how often it is tried and how
 * long one run may take. `enqueue` and `consume` are the only ways in and out.
 */
export interface JobDefinition<S extends z.ZodType = z.ZodType> {
  readonly queue: QueueName;
  /** The BullMQ job name; a queue may carry several kinds, told apart by it. */
  readonly name: string;
  readonly schema: S;
  /**
   * Runs before the job fails for good; between them the job backs off exponentially from
   * `--job-backoff` with jitter (queues/options.ts). An error that says it cannot be retried
   * fails the job at once, whatever is left (queues/retry.ts).
   */
  readonly attempts: number;
  /** Finished jobs kept, when not the configured retention. */
  readonly retention?: { completed: number; failed: number };
  /** The deadline of one run (`ctx.deadline` in a consumer), from the configuration. None: only the job's own signal. */
  readonly deadlineMs?: (settings: JobSettings) => number;
}

/** The payload type of a job definition. */
export type JobData<D extends JobDefinition> = z.output<D['schema']>;

export function define<S extends z.ZodType>(def: JobDefinition<S>): JobDefinition<S> {
  return Object.freeze(def);
}

/** A job's payload did not match its schema. Never retried: the same payload fails the same way. */
export class JobDataError extends Error {
  readonly code = 'ERR_JOB_DATA';
  readonly retryable = false;
  constructor(queue: string, message: string, cause: unknown) {
    super(`invalid ${queue} job data: ${message}`, { cause });
    this.name = 'JobDataError';
  }
}

/** Validates job data on either end of a queue; a bad payload is never retried. */
export function parseJobData<T>(schema: z.ZodType<T>, queue: string, data: unknown): T {
  const result = schema.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new JobDataError(queue, `${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`, result.error);
  }
  return result.data;
}

/**
 * The options of a job of this kind as a job scheduler's template: the configured backoff and
 * retention, its own attempts and retention. Each scheduled job starts a trace of its own
 * (`omitContext`): without it every job a scheduler ever produces would join the trace of the
 * upsert that created the scheduler.
 */
export function jobOptions(def: JobDefinition, settings: JobOptionSettings): JobsOptions {
  return { ...defaultJobOptions(settings), ...ownOptions(def), telemetry: { omitContext: true } };
}

function ownOptions(def: JobDefinition): JobsOptions {
  return {
    attempts: def.attempts,
    ...(def.retention ? { removeOnComplete: { count: def.retention.completed }, removeOnFail: { count: def.retention.failed } } : {}),
  };
}

/** What a caller may add to a job: its id, a deduplication, a delay. The rest is the definition's. */
export type EnqueueOptions = Pick<JobsOptions, 'jobId' | 'deduplication' | 'delay'>;

/**
 * The way in: validates the payload against the definition and adds the job with the
 * definition's options (the queue, opened with `openQueue`, supplies the configured backoff and
 * retention).
 */
export async function enqueue<D extends JobDefinition>(queue: Queue, def: D, data: z.input<D['schema']>, options: EnqueueOptions = {}): Promise<Job> {
  if (queue.name !== def.queue) throw new Error(`a ${def.name} job belongs on the ${def.queue} queue, not ${queue.name}`);
  const payload = parseJobData(def.schema, def.queue, data);
  return queue.add(def.name, payload, { ...ownOptions(def), ...options });
}
