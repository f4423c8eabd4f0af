import type { Queue, Telemetry } from 'bullmq';
import { redisOptions, type RedisTarget } from '../queues/connection.ts';
import { consume, openQueue, type Consumer, type JobHandler } from '../queues/consume.ts';
import type { QueueName } from '../queues/names.ts';
import { withDeadline } from '../src/abort.ts';
import type { AppConfig } from '../src/config/app.ts';
import type { Logger } from '../src/logging.ts';
import type { JobMetrics } from '../src/metrics/job-metrics.ts';
import { redactError } from '../src/secrets/redact-error.ts';
import type { Redactor } from '../src/secrets/secret-registry.ts';

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

/** `consume` with the configuration's locks, grace period and deadlines, this process's metrics and logger. */
export function consumeJobs(deps: ConsumerDeps, queue: QueueName, handlers: readonly JobHandler[], concurrency: number): Promise<Consumer> {
  const { config, secrets } = deps;
  return consume(queue, handlers, {
    connection: redisOptions(deps.redisTarget, 'worker'),
    prefix: config.redis.prefix,
    settings: config,
    concurrency,
    lockDurationMs: config.worker.lockDurationMs,
    stalledIntervalMs: config.worker.stalledIntervalMs,
    graceMs: config.shutdownGraceMs,
    observer: deps.jobMetrics,
    logger: deps.logger,
    withDeadline,
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
