import type { Telemetry } from 'bullmq';
import type { RedisTarget } from '../queues/connection.ts';
import { handle, type Consumer } from '../queues/consume.ts';
import { QUEUES } from '../queues/names.ts';
import type { AppConfig } from '../src/config/app.ts';
import { nextProviderHealth } from '../src/health/next-status.ts';
import type { ProviderHealth } from '../src/health/provider-health.ts';
import type { Logger } from '../src/logging.ts';
import type { JobMetrics } from '../src/metrics/job-metrics.ts';
import type { StatusStore } from '../src/store/status-store.ts';
import { withSpan } from '../src/telemetry/spans.ts';
import { consumeJobs } from './consumer.ts';
import type { Redactor } from '../src/secrets/secret-registry.ts';
import type { EventSink } from '../src/events/event-sink.ts';
import { reasonChanges } from '../src/events/health-events.ts';
import { RoleLifecycle, type RoleStateObserver, type RoleStatus } from '../src/roles/role-lifecycle.ts';
import { JOBS } from '../src/work/jobs.ts';
import type { CheckResultData } from '../src/health/check-result.ts';

export interface PublisherDeps {
  config: AppConfig;
  redisTarget: RedisTarget | string;
  store: StatusStore;
  logger: Logger;
  jobMetrics: JobMetrics;
  now?: () => Date;
  /** Where check reason flips are recorded. */
  events?: EventSink;
  /** The publisher role's BullMQ telemetry; undefined when tracing is off. */
  telemetry?: Telemetry | undefined;
  /** The process's secret registry: a failed results job's error passes its redaction (the Redis password in a connection error). */
  secrets?: Redactor;
  /** Told each state the role enters (src/roles/role-lifecycle.ts). */
  onState?: RoleStateObserver | undefined;
}

export interface PublisherRole {
  /** starting → running → draining → stopped, or failed (its consumer stopped taking jobs, its close went wrong). */
  readonly status: RoleStatus;
  readonly worker: Consumer['worker'];
  /** Bounded; rejects with a ShutdownError naming what did not close. Idempotent. */
  close(): Promise<void>;
}

/**
 * Applies check results (a batch, in the order the checks finished) to the store: the results
 * of each provider folded in order into one write of its ProviderHealth. Idempotent: the same
 * job delivered twice writes nothing the second time. Results for providers no longer configured
 * are dropped, so a late result cannot bring back a ProviderHealth the scheduler deleted.
 * Returns what was stored, a provider an entry.
 */
export async function publishResults(
  results: readonly CheckResultData[],
  deps: { store: StatusStore; configured: ReadonlySet<string>; now: () => Date; logger: Logger; events?: EventSink },
  signal?: AbortSignal,
): Promise<ProviderHealth[]> {
  const byProvider = new Map<string, CheckResultData[]>();
  for (const result of results) {
    if (!deps.configured.has(result.provider)) {
      deps.logger.info({ provider: result.provider }, 'dropping a result for a provider that is no longer configured');
      continue;
    }
    const list = byProvider.get(result.provider) ?? [];
    list.push(result);
    byProvider.set(result.provider, list);
  }
  const stored = await Promise.all(
    [...byProvider].map(([provider, list]) =>
      withSpan('write provider health', { 'egress.provider': provider, 'egress.results': list.length }, async () => {
        // The update may run again when another writer got there first: the flips of the run that was written count.
        let flips: ReturnType<typeof reasonChanges> = [];
        const health = await deps.store.updateProviderHealth(
          provider,
          (current) => {
            const next = list.reduce<ProviderHealth | undefined>((h, result) => nextProviderHealth(h, result, deps.now()), current);
            flips = next ? reasonChanges(current, next) : [];
            return next;
          },
          signal,
        );
        for (const flip of flips) deps.events?.record(flip);
        return health;
      }),
    ),
  );
  return stored.filter((health) => health !== undefined);
}

/** `egress publisher`: consumes the durable `results` queue (`results` and `result` jobs) into ProviderHealth status. */
export async function startPublisherRole(deps: PublisherDeps): Promise<PublisherRole> {
  const { config, logger } = deps;
  const lifecycle = new RoleLifecycle('publisher', deps.onState);
  const configured = new Set(config.providers.map((p) => p.name));
  const now = deps.now ?? (() => new Date());
  const publish = async (results: readonly CheckResultData[], jobId: string | undefined, signal: AbortSignal): Promise<void> => {
    const log = logger.child({ jobId, queue: QUEUES.results });
    try {
      const stored = await publishResults(
        results,
        { store: deps.store, configured, now, logger: log, ...(deps.events ? { events: deps.events } : {}) },
        signal,
      );
      for (const health of stored) log.debug({ provider: health.name, ready: health.status.ready }, 'published provider health');
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'status write failed; the result will be retried');
      throw err;
    }
  };
  const consumer = await consumeJobs(
    deps,
    undefined,
    QUEUES.results,
    [
      handle(JOBS.results, (data, ctx) => publish(data.results, ctx.job.id, ctx.signal)),
      handle(JOBS.result, (data, ctx) => publish([data], ctx.job.id, ctx.signal)),
    ],
    // Transactions on one provider's object serialise in the store; concurrency overlaps the
    // queue round trips of different results.
    32,
  ).catch((err: unknown) => {
    lifecycle.fail(err);
    throw err;
  });
  lifecycle.watch(consumer.stopped);
  logger.info('publisher started');
  lifecycle.started();
  return { status: lifecycle, worker: consumer.worker, close: () => lifecycle.close([() => consumer.close()]) };
}
