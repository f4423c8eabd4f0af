import type { Job, JobsOptions, Queue } from 'bullmq';
import { z } from 'zod';
import { checkResultSchema } from './check-result.ts';
import { QUEUES, type QueueName } from './names.ts';
import { defaultJobOptions, type JobOptionSettings } from './options.ts';

export { checkResultSchema, targetResultSchema, type CheckResultData, type TargetResult } from './check-result.ts';

/** A request to check one provider. */
export const checkJobSchema = z.strictObject({
  provider: z.string().min(1),
  trigger: z.enum(['schedule', 'startup', 'adhoc']),
});
export type CheckJobData = z.infer<typeof checkJobSchema>;

/** Reconcile one proxy: the job carries only its name (level-triggered). */
export const reconcileJobSchema = z.strictObject({ proxy: z.string().min(1) });
export type ReconcileJobData = z.infer<typeof reconcileJobSchema>;

/** Reconcile one ProxyPool (its members): the job carries only its name. */
export const poolReconcileJobSchema = z.strictObject({ pool: z.string().min(1) });
export type PoolReconcileJobData = z.infer<typeof poolReconcileJobSchema>;

/** Sweep one provider's instances for orphans. */
export const gcJobSchema = z.strictObject({ provider: z.string().min(1) });
export type GcJobData = z.infer<typeof gcJobSchema>;

/** The check results that check workers finished together, in the order they finished. */
export const resultsJobSchema = z.strictObject({ results: z.array(checkResultSchema).min(1) });
export type ResultsJobData = z.infer<typeof resultsJobSchema>;

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

function define<S extends z.ZodType>(def: JobDefinition<S>): JobDefinition<S> {
  return Object.freeze(def);
}

/** Deadline of one reconcile or GC sweep: long enough for a provider's create call and its operation. */
const PROVIDER_WORK_MS = 5 * 60_000;
/**
 * How long into a GC sweep deletes may still start: a minute short of its deadline, for the deletes
 * in flight (a gcp delete waits for its operation) to finish, so that a sweep with more orphans than
 * its pace allows ends on its own and leaves the rest to the next.
 */
export const GC_DELETE_BUDGET_MS = PROVIDER_WORK_MS - 60_000;

export const JOBS = {
  /** Check one provider; the deadline is `--provider-check-timeout` (resolved), from when the check starts. */
  check: define({ queue: QUEUES.checks, name: 'check', schema: checkJobSchema, attempts: 5, deadlineMs: (s) => s.checks.timeoutMs }),
  /** Reconcile one proxy. */
  reconcile: define({ queue: QUEUES.reconcile, name: 'reconcile', schema: reconcileJobSchema, attempts: 5, deadlineMs: () => PROVIDER_WORK_MS }),
  /** Reconcile one pool: create, replace and delete its member Proxies (they are reconciled by their own jobs). */
  poolReconcile: define({ queue: QUEUES.reconcile, name: 'pool-reconcile', schema: poolReconcileJobSchema, attempts: 5, deadlineMs: () => PROVIDER_WORK_MS }),
  /**
   * A delayed look at one pool (a member reaching maxAge, a Failed member due for replacement): it only
   * asks for the pool's deduplicated reconcile when it comes due. A separate job, never the
   * deduplicated reconcile itself delayed: a delayed job holding the deduplication id would swallow
   * every immediate request until it came due.
   */
  poolLook: define({ queue: QUEUES.reconcile, name: 'pool-look', schema: poolReconcileJobSchema, attempts: 3, retention: { completed: 100, failed: 100 } }),
  /** The periodic resync: asks for a reconcile of every proxy. Its next run is the retry. */
  resync: define({ queue: QUEUES.reconcile, name: 'resync', schema: z.strictObject({}), attempts: 1, retention: { completed: 10, failed: 100 } }),
  /** One garbage-collection sweep of a provider. Its next sweep is the retry. */
  gc: define({ queue: QUEUES.gc, name: 'gc', schema: gcJobSchema, attempts: 1, deadlineMs: () => PROVIDER_WORK_MS }),
  /** Results of checks finished together, for the publisher. */
  results: define({ queue: QUEUES.results, name: 'results', schema: resultsJobSchema, attempts: 5 }),
  /** One result alone: what a batch of one is, and what earlier releases put on the queue. */
  result: define({ queue: QUEUES.results, name: 'result', schema: checkResultSchema, attempts: 5 }),
} as const;

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
