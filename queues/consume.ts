import { setMaxListeners } from 'node:events';
import { DelayedError, Queue, RateLimitError, UnrecoverableError, WaitingChildrenError, Worker, type Job, type RedisOptions, type Telemetry } from 'bullmq';
import { closeBounded } from './bounded-close.ts';
import { RunningJob, type DeadlineSource, type DeadlineSources, type JobContext } from './job-context.ts';
import { parseJobData, type JobData, type JobDefinition, type JobSettings } from './jobs.ts';
import type { JobLog } from './log.ts';
import type { QueueName } from './names.ts';
import { defaultJobOptions, type JobOptionSettings } from './options.ts';
import { retryVerdict } from './retry.ts';

/** Where job durations, outcomes and waits go (the project's JobMetrics). */
export interface JobObserver {
  observe(queue: string, outcome: 'completed' | 'failed' | 'retried', seconds: number): void;
  observeWait(queue: string, seconds: number): void;
}

export type { DeadlineSource, DeadlineSources, JobContext } from './job-context.ts';

/** A handler for one kind of job (method syntax: handlers of different kinds share a list). */
export interface JobHandler<D extends JobDefinition = JobDefinition, W = unknown> {
  readonly def: D;
  run(data: JobData<D>, ctx: JobContext<W>): Promise<unknown>;
}

export function handle<D extends JobDefinition, W = unknown>(def: D, run: (data: JobData<D>, ctx: JobContext<W>) => Promise<unknown>): JobHandler<D, W> {
  return { def, run };
}

export interface ConsumeOptions<W = unknown> {
  /** What every handler of this consumer gets as `ctx.work`: the way it asks for more work. */
  work: W;
  /** BullMQ connection options for a worker (`redisOptions(target, 'worker')`). */
  connection: RedisOptions;
  prefix: string;
  settings: JobSettings;
  concurrency: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  /** How long `close` waits for running jobs before it aborts them. */
  graceMs: number;
  observer: JobObserver;
  logger: JobLog;
  /** Where a kind of job's deadlines come from, given the consumer's cancellation and the deadline (the project's SharedDeadlines). */
  deadlines: DeadlineSources;
  /**
   * BullMQ's telemetry (bullmq-otel): a `process` span per job, child of the span that added it
   * (the trace context travels in the job's options), with the handler running inside it.
   * Undefined: no tracing.
   */
  telemetry?: Telemetry | undefined;
  /**
   * The process's one redaction of errors (src/secrets/redact-error.ts over its secret registry),
   * applied to whatever a handler throws before BullMQ sees it: the failed job's `failedReason` and
   * `stacktrace`, the job span's exception and status, and the failure log line carry its result.
   * Undefined: errors pass as thrown.
   */
  redactError?: ((err: unknown) => unknown) | undefined;
}

export interface Consumer {
  readonly worker: Worker;
  /**
   * Settles when the consumer stops: resolves after `close()` once its worker's run loop ended;
   * rejects with a ConsumerFailedError when the loop rejected or ended without a close (the
   * consumer takes no more jobs: its role has failed).
   */
  readonly stopped: Promise<void>;
  /**
   * Stops taking jobs, waits the grace period, aborts the rest, closes its connections (bounded:
   * queues/bounded-close.ts; rejects with its CloseError when that went wrong). Idempotent.
   */
  close(): Promise<void>;
}

/** A consumer whose BullMQ worker stopped running while nobody closed it (`ERR_CONSUMER_FAILED`); `cause` when its run loop rejected. */
export class ConsumerFailedError extends Error {
  readonly code = 'ERR_CONSUMER_FAILED';
  readonly retryable = false;
  readonly queue: string;
  constructor(queue: string, message: string, cause?: unknown) {
    super(`the ${queue} consumer stopped taking jobs: ${message}`, cause === undefined ? undefined : { cause });
    this.name = 'ConsumerFailedError';
    this.queue = queue;
  }
}

/**
 * Seconds a job waited before its first run: from when it was due (added, or for a scheduled or
 * delayed job when its delay ended) to its start. BullMQ zeroes a job's `delay` when it promotes
 * it, so the due time comes from the options it was added with. A job's later runs (a retry, a
 * stalled job taken over, "look again later") are not counted: when they became due is not kept.
 */
export function waitSeconds(job: Pick<Job, 'timestamp' | 'opts' | 'processedOn' | 'attemptsStarted'>): number | undefined {
  if (job.processedOn === undefined || job.attemptsStarted > 1) return undefined;
  const due = job.timestamp + Math.max(0, job.opts.delay ?? 0);
  return Math.max(0, (job.processedOn - due) / 1000);
}

function seconds(from: number | undefined, to: number | undefined): number {
  return from !== undefined && to !== undefined ? Math.max(0, (to - from) / 1000) : 0;
}

/** Job duration, outcome and wait metrics and logs for one worker; also its mandatory error listener. */
function instrument(worker: Worker, observer: JobObserver, logger: JobLog): void {
  const queue = worker.name;
  worker.on('active', (job: Job) => {
    const wait = waitSeconds(job);
    if (wait !== undefined) observer.observeWait(queue, wait);
  });
  worker.on('completed', (job: Job) => {
    observer.observe(queue, 'completed', seconds(job.processedOn, job.finishedOn));
  });
  worker.on('failed', (job: Job | undefined, err: Error) => {
    if (!job) return;
    const final = job.attemptsMade >= (job.opts.attempts ?? 1) || err.name === 'UnrecoverableError';
    observer.observe(queue, final ? 'failed' : 'retried', seconds(job.processedOn, job.finishedOn ?? Date.now()));
    logger.warn({ jobId: job.id, queue, attemptsMade: job.attemptsMade, final, err: err.message }, final ? 'job failed' : 'job failed; will retry');
  });
  worker.on('stalled', (jobId: string) => logger.warn({ jobId, queue }, 'job stalled: its worker went away; requeued'));
  worker.on('error', (err: Error) => logger.error({ queue, err: err.message }, 'worker error'));
}

/** BullMQ's own control-flow errors pass through unchanged. */
function isBullmqSignal(err: unknown): boolean {
  return err instanceof DelayedError || err instanceof UnrecoverableError || err instanceof WaitingChildrenError || err instanceof RateLimitError;
}

function unrecoverable(err: unknown): UnrecoverableError {
  const message = err instanceof Error ? err.message : String(err);
  const final = new UnrecoverableError(message);
  final.cause = err;
  return final;
}

/** Turns what a handler threw into what BullMQ acts on, by the error's own retry data (queues/retry.ts). */
async function settle(err: unknown, job: Job, token: string | undefined, signal: AbortSignal): Promise<unknown> {
  if (isBullmqSignal(err)) return err;
  // The job itself was cancelled (the consumer's shutdown): whatever the handler threw is no verdict.
  if (signal.aborted) return err;
  const verdict = retryVerdict(err);
  if (verdict.kind === 'final') return unrecoverable(err);
  if (verdict.kind === 'later') {
    await job.moveToDelayed(Date.now() + verdict.delayMs, token);
    return new DelayedError();
  }
  return err;
}

/**
 * The way out: a BullMQ worker for one queue that validates each job against its definition
 * (a payload that does not parse, or a job name with no handler, fails at once), hands the
 * handler its payload, the job's signal and deadline, turns what it throws into BullMQ's retry
 * decision, and counts and logs every job. Started and ready when it resolves.
 */
export async function consume<W>(queue: QueueName, handlers: readonly JobHandler<JobDefinition, W>[], options: ConsumeOptions<W>): Promise<Consumer> {
  const byName = new Map<string, JobHandler<JobDefinition, W>>();
  for (const h of handlers) {
    if (h.def.queue !== queue) throw new Error(`a ${h.def.name} handler cannot consume the ${queue} queue: its jobs go on ${h.def.queue}`);
    byName.set(h.def.name, h);
  }
  // One cancellation for every job of this consumer, ended by its close after the grace period.
  // Two-parameter processor: BullMQ then makes no AbortController per job (it would end only with
  // its own cancelJob/cancelAllJobs, which nothing here calls but the close, which ends this one).
  const cancellation = new AbortController();
  // Each running job's own signal and deadline listen to it while the job runs, and let go when it ends.
  setMaxListeners(0, cancellation.signal);
  const deadlines = new Map<string, DeadlineSource>();
  for (const h of handlers) {
    const ms = h.def.deadlineMs?.(options.settings);
    if (ms !== undefined) deadlines.set(h.def.name, options.deadlines(cancellation.signal, ms));
  }
  const clean = options.redactError ?? ((err: unknown) => err);
  const processor = async (job: Job, token: string | undefined): Promise<unknown> => {
    const handler = byName.get(job.name);
    if (!handler) throw new UnrecoverableError(`no handler for "${job.name}" jobs on the ${queue} queue`);
    let data: unknown;
    try {
      data = parseJobData(handler.def.schema, queue, job.data);
    } catch (err) {
      throw unrecoverable(clean(err));
    }
    const ctx = new RunningJob(job, options.work, cancellation.signal, deadlines.get(job.name));
    try {
      return await handler.run(data, ctx);
    } catch (err) {
      throw await settle(clean(err), job, token, cancellation.signal);
    } finally {
      ctx.release();
    }
  };
  const worker = new Worker(queue, processor, {
    connection: options.connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    lockDuration: options.lockDurationMs,
    stalledInterval: options.stalledIntervalMs,
    autorun: false,
    ...(options.telemetry ? { telemetry: options.telemetry } : {}),
  });
  instrument(worker, options.observer, options.logger);
  let closing: Promise<void> | undefined;
  // BullMQ retries what Redis does to the loop by itself: the loop ends only when the worker is
  // closed, or when something it does not survive happened. Without our close, that is the end
  // of this consumer.
  const stopped = worker.run().then(
    () => {
      if (!closing) throw new ConsumerFailedError(queue, 'its BullMQ worker ended its run loop without being closed');
    },
    (err: unknown) => {
      if (closing) return;
      throw new ConsumerFailedError(queue, err instanceof Error ? err.message : String(err), err);
    },
  );
  stopped.catch((err: unknown) => options.logger.error({ queue, err: (err as Error).message }, 'consumer failed'));
  const close = (): Promise<void> => {
    closing ??= closeBounded(worker, {
      graceMs: options.graceMs,
      logger: options.logger,
      what: `the ${queue} worker`,
      cancelRunning: (reason) => cancellation.abort(reason),
    });
    return closing;
  };
  try {
    await worker.waitUntilReady();
  } catch (err) {
    // A consumer that never became ready leaves nothing open behind it.
    await close().catch(() => undefined);
    throw err;
  }
  return { worker, stopped, close };
}

/** The way to a queue for producers: the configured backoff and retention as defaults, and the mandatory error listener. */
export function openQueue(
  name: QueueName,
  options: { connection: RedisOptions; prefix: string; settings: JobOptionSettings; logger: JobLog; telemetry?: Telemetry | undefined },
): Queue {
  // With telemetry, each add is a span whose context the job carries to its consumer.
  const queue = new Queue(name, {
    connection: options.connection,
    prefix: options.prefix,
    defaultJobOptions: defaultJobOptions(options.settings),
    ...(options.telemetry ? { telemetry: options.telemetry } : {}),
  });
  queue.on('error', (err: Error) => options.logger.warn({ queue: name, err: err.message }, 'queue connection error'));
  return queue;
}
