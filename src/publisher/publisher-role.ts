import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { redisOptions, type RedisTarget } from '../../queues/connection.ts';
import { JobDataError, parseJobData, resultsJobSchema, type CheckResultData } from '../../queues/jobs.ts';
import { QUEUES } from '../../queues/names.ts';
import type { AppConfig } from '../config/app.ts';
import { nextProviderHealth } from '../health/next-status.ts';
import type { ProviderHealth } from '../health/provider-health.ts';
import type { Logger } from '../logging.ts';
import type { JobMetrics } from '../metrics/job-metrics.ts';
import { closeWorkerBounded } from '../runtime/bounded-close.ts';
import type { StatusStore } from '../store/status-store.ts';
import { instrumentWorker } from '../../workers/instrument.ts';

export interface PublisherDeps {
  config: AppConfig;
  redisTarget: RedisTarget | string;
  store: StatusStore;
  logger: Logger;
  jobMetrics: JobMetrics;
  now?: () => Date;
}

export interface PublisherRole {
  readonly worker: Worker;
  close(): Promise<void>;
}

/**
 * Applies one `results` job (a batch of results, or one result) to the store: the results of
 * each provider folded in order into one write of its ProviderHealth. Idempotent: the same job
 * delivered twice writes nothing the second time. Results for providers no longer configured
 * are dropped, so a late result cannot bring back a ProviderHealth the scheduler deleted.
 * Returns what was stored, a provider an entry.
 */
export async function publishResults(
  data: unknown,
  deps: { store: StatusStore; configured: ReadonlySet<string>; now: () => Date; logger: Logger },
  signal?: AbortSignal,
): Promise<ProviderHealth[]> {
  const { results } = parseJobData(resultsJobSchema, QUEUES.results, data);
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
      deps.store.updateProviderHealth(provider, (current) => list.reduce<ProviderHealth | undefined>((health, result) => nextProviderHealth(health, result, deps.now()), current), signal),
    ),
  );
  return stored.filter((health) => health !== undefined);
}

/** `egress publisher`: consumes the durable `results` queue into ProviderHealth status. */
export async function startPublisherRole(deps: PublisherDeps): Promise<PublisherRole> {
  const { config, logger } = deps;
  const configured = new Set(config.providers.map((p) => p.name));
  const now = deps.now ?? (() => new Date());
  const worker = new Worker(
    QUEUES.results,
    async (job: Job, _token: string | undefined, signal: AbortSignal | undefined) => {
      const log = logger.child({ jobId: job.id, queue: QUEUES.results });
      try {
        const stored = await publishResults(job.data, { store: deps.store, configured, now, logger: log }, signal);
        for (const health of stored) log.debug({ provider: health.name, ready: health.status.ready }, 'published provider health');
      } catch (err) {
        if (err instanceof JobDataError) throw new UnrecoverableError((err as Error).message);
        log.warn({ err: (err as Error).message }, 'status write failed; the result will be retried');
        throw err;
      }
    },
    {
      connection: redisOptions(deps.redisTarget, 'worker'),
      prefix: config.redis.prefix,
      // Transactions on one provider's object serialise in the store; concurrency overlaps the
      // queue round trips of different results.
      concurrency: 32,
      lockDuration: config.worker.lockDurationMs,
      stalledInterval: config.worker.stalledIntervalMs,
      autorun: false,
    },
  );
  instrumentWorker(worker, deps.jobMetrics, logger);
  worker.run().catch((err: unknown) => logger.error({ err: (err as Error).message }, 'publisher stopped'));
  await worker.waitUntilReady();
  logger.info('publisher started');
  let closing: Promise<void> | undefined;
  return {
    worker,
    close() {
      closing ??= closeWorkerBounded(worker, config.shutdownGraceMs, logger);
      return closing;
    },
  };
}
