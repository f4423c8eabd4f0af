import { Queue, Worker } from 'bullmq';
import { redisOptions, type RedisTarget } from '../queues/connection.ts';
import { QUEUES } from '../queues/names.ts';
import { defaultJobOptions } from '../queues/options.ts';
import type { AppConfig } from '../src/config/app.ts';
import type { Logger } from '../src/logging.ts';
import type { JobMetrics } from '../src/metrics/job-metrics.ts';
import type { Provider } from '../src/providers/types.ts';
import { closeWorkerBounded } from '../src/runtime/bounded-close.ts';
import { createCheckProcessor } from './check-processor.ts';
import { createResultBatcher } from './result-batcher.ts';
import pLimit from 'p-limit';
import { createReconcileProcessor } from './reconcile-processor.ts';
import { createGcProcessor } from './gc-processor.ts';
import type { Registry } from 'prom-client';
import { createReconcileMetrics } from '../src/metrics/proxy-metrics.ts';
import type { ProxyLifecycle } from '../src/providers/lifecycle.ts';
import { fleetOf } from '../src/proxies/instance-name.ts';
import { reconcileProbe } from '../src/readiness/reconcile-probe.ts';
import type { ProxyStore } from '../src/store/proxy-store.ts';

/** Deadline of one reconcile: long enough for a provider's create call and its operation. */
const RECONCILE_TIMEOUT_MS = 5 * 60_000;
import { instrumentWorker } from './instrument.ts';
import type { ProbeLoop } from '../src/readiness/probe-loop.ts';
import { startReadiness } from './readiness-watch.ts';

export interface WorkerRoleDeps {
  config: AppConfig;
  redisTarget: RedisTarget | string;
  providers: ReadonlyMap<string, Provider>;
  proxies: ProxyStore;
  registry: Registry;
  /** The echo URL readiness probes use (known once the API of this process listens). */
  echoUrl: () => string;
  logger: Logger;
  jobMetrics: JobMetrics;
}

export interface WorkerRole {
  readonly workers: readonly Worker[];
  /** The readiness probe loop (workers of the reconcile queue with --probe-interval above 0). */
  readonly probeLoop: ProbeLoop | undefined;
  /** Stops taking jobs, waits the grace period, aborts the rest, closes connections. */
  close(): Promise<void>;
}

/** Check jobs a worker takes per check it runs at once (the others wait for their results to be stored). */
const CHECK_JOBS_PER_SLOT = 2;

/** `egress worker`: BullMQ workers for the configured queues, holding provider clients for life. */
export async function startWorkerRole(deps: WorkerRoleDeps): Promise<WorkerRole> {
  const { config, logger } = deps;
  const prefix = config.redis.prefix;
  const results = new Queue(QUEUES.results, {
    connection: redisOptions(deps.redisTarget, 'worker'),
    prefix,
    defaultJobOptions: defaultJobOptions(config),
  });
  results.on('error', (err) => logger.warn({ err: err.message }, 'results queue connection error'));
  const reconcileQueue = new Queue(QUEUES.reconcile, { connection: redisOptions(deps.redisTarget, 'worker'), prefix, defaultJobOptions: defaultJobOptions(config) });
  reconcileQueue.on('error', (err) => logger.warn({ err: err.message }, 'reconcile queue connection error'));
  const lifecycles = new Map<string, ProxyLifecycle>();
  for (const [name, p] of deps.providers) if (p.lifecycle) lifecycles.set(name, p.lifecycle);
  const reconcileMetrics = createReconcileMetrics(deps.registry);
  const probe = reconcileProbe(deps.proxies, deps.echoUrl, config.readiness.timeoutMs);
  const processors = {
    checks: createCheckProcessor({ providers: deps.providers, results: createResultBatcher(results), checkSlots: pLimit(config.worker.concurrency), timeoutMs: config.checks.timeoutMs, logger }),
    reconcile: createReconcileProcessor({
      proxies: deps.proxies,
      reconcile: reconcileQueue,
      metrics: reconcileMetrics,
      readiness: config.readiness,
      lifecycles,
      fleet: fleetOf(prefix),
      probe,
      logger,
      timeoutMs: RECONCILE_TIMEOUT_MS,
      recheckMs: config.recheckMs,
    }),
    gc: createGcProcessor({
      proxies: deps.proxies,
      lifecycles,
      fleet: fleetOf(prefix),
      graceMs: config.gcGraceMs,
      registry: deps.registry,
      logger,
      timeoutMs: RECONCILE_TIMEOUT_MS,
    }),
  };
  const workers: Worker[] = [];
  for (const queue of config.worker.queues) {
    const worker = new Worker(
      QUEUES[queue],
      processors[queue],
      {
        connection: redisOptions(deps.redisTarget, 'worker'),
        prefix,
        // A check job holds its place until its result is on the `results` queue; twice the jobs
        // let the next checks run meanwhile, while at most --concurrency checks run at once.
        concurrency: queue === 'checks' ? config.worker.concurrency * CHECK_JOBS_PER_SLOT : config.worker.concurrency,
        lockDuration: config.worker.lockDurationMs,
        stalledInterval: config.worker.stalledIntervalMs,
        autorun: false,
      },
    );
    instrumentWorker(worker, deps.jobMetrics, logger);
    workers.push(worker);
  }
  for (const w of workers) {
    w.run().catch((err: unknown) => logger.error({ queue: w.name, err: (err as Error).message }, 'worker stopped'));
    await w.waitUntilReady();
  }
  const readiness = config.worker.queues.includes('reconcile')
    ? startReadiness({ config, redisTarget: deps.redisTarget, proxies: deps.proxies, logger }, reconcileQueue, lifecycles, probe, reconcileMetrics)
    : undefined;
  logger.info({ queues: config.worker.queues, concurrency: config.worker.concurrency, probeIntervalMs: readiness?.probeLoop ? config.readiness.intervalMs : 0 }, 'worker started');

  let closing: Promise<void> | undefined;
  return {
    workers,
    probeLoop: readiness?.probeLoop,
    close() {
      closing ??= (async () => {
        await readiness?.close();
        await Promise.all(workers.map((w) => closeWorkerBounded(w, config.shutdownGraceMs, logger)));
        await results.close();
        await reconcileQueue.close();
      })();
      return closing;
    },
  };
}

