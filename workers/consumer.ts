import type { Queue, Telemetry } from 'bullmq';
import { redisOptions, type RedisTarget } from '../queues/connection.ts';
import { consume, handle, openQueue, type Consumer, type JobContext, type JobHandler } from '../queues/consume.ts';
import type { JobData, JobDefinition } from '../queues/jobs.ts';
import type { QueueName } from '../queues/names.ts';
import { SharedDeadlines } from '../src/abort.ts';
import type { AppConfig } from '../src/config/app.ts';
import type { Logger } from '../src/logging.ts';
import type { JobMetrics } from '../src/metrics/job-metrics.ts';
import { redactError } from '../src/secrets/redact-error.ts';
import type { Redactor } from '../src/secrets/secret-registry.ts';
import type { WorkRequests } from '../src/work/work-requests.ts';

/** Jobs whose deadline starts within this long share one deadline signal (src/abort.ts SharedDeadlines). */
const DEADLINE_GRANULARITY_MS = 50;

/** What every consumer of this project binds the job boundary to: configuration, Redis, metrics, logs. */
export interface ConsumerDeps {
  config: AppConfig;
  redisTarget: RedisTarget | string;
  jobMetrics: JobMetrics;
  logger: Logger;
  /** The role's BullMQ telemetry (src/telemetry/tracing.ts); undefined when tracing is off. */
  telemetry?: Telemetry | undefined;
  /** The process's secret registry: what a handler throws is redacted before it becomes a failed job, a span or a log line. */
  secrets?: Redactor | undefined;
}

/** What a handler of a worker's queues gets: the job, its signal and deadline, and the domain's work-requests port. */
export type WorkJobContext = JobContext<WorkRequests>;

/** A handler of a worker's queues, which may ask for more work through `ctx.work`. */
export type WorkJobHandler = JobHandler<JobDefinition, WorkRequests>;

/** `handle` for a worker's queues: the handler's context carries the work-requests port. */
export function handleWork<D extends JobDefinition>(def: D, run: (data: JobData<D>, ctx: WorkJobContext) => Promise<unknown>): JobHandler<D, WorkRequests> {
  return handle<D, WorkRequests>(def, run);
}

/**
 * `consume` with the configuration's locks, grace period and deadlines, this process's metrics and
 * logger; every handler gets `work` as `ctx.work` (the worker's work-requests port; the publisher,
 * which asks for no work, passes undefined).
 */
export function consumeJobs<W>(
  deps: ConsumerDeps,
  work: W,
  queue: QueueName,
  handlers: readonly JobHandler<JobDefinition, W>[],
  concurrency: number,
): Promise<Consumer> {
  const { config, secrets } = deps;
  return consume(queue, handlers, {
    work,
    connection: redisOptions(deps.redisTarget, 'worker'),
    prefix: config.redis.prefix,
    settings: config,
    concurrency,
    lockDurationMs: config.worker.lockDurationMs,
    stalledIntervalMs: config.worker.stalledIntervalMs,
    graceMs: config.shutdownGraceMs,
    observer: deps.jobMetrics,
    logger: deps.logger,
    deadlines: (cancellation, ms) => new SharedDeadlines(ms, DEADLINE_GRANULARITY_MS, undefined, cancellation),
    telemetry: deps.telemetry,
    redactError: secrets ? (err) => redactError(err, secrets) : undefined,
  });
}

/** A queue a consumer adds jobs to (results, follow-up reconciles), on a connection that waits out Redis outages. */
export function openJobQueue(deps: Pick<ConsumerDeps, 'config' | 'redisTarget' | 'logger' | 'telemetry'>, name: QueueName): Queue {
  return openQueue(name, {
    connection: redisOptions(deps.redisTarget, 'worker'),
    prefix: deps.config.redis.prefix,
    settings: deps.config,
    logger: deps.logger,
    telemetry: deps.telemetry,
  });
}
