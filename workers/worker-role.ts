import { Queue, Worker } from 'bullmq';
import { redisOptions } from '../queues/connection.ts';
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
import { Redis } from 'ioredis';
import type { InstanceExit } from '../src/providers/lifecycle.ts';
import { requestReconcile } from '../src/proxies/request-reconcile.ts';
import type { ReadinessHooks } from '../src/proxies/reconcile.ts';
import { recordFailure, type FailureDeps } from '../src/readiness/evict.ts';
import { ProbeLoop } from '../src/readiness/probe-loop.ts';

export interface WorkerRoleDeps {
  config: AppConfig;
  redisUrl: string;
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
    connection: redisOptions(deps.redisUrl, 'worker'),
    prefix,
    defaultJobOptions: defaultJobOptions(config),
  });
  results.on('error', (err) => logger.warn({ err: err.message }, 'results queue connection error'));
  const reconcileQueue = new Queue(QUEUES.reconcile, { connection: redisOptions(deps.redisUrl, 'worker'), prefix, defaultJobOptions: defaultJobOptions(config) });
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
        connection: redisOptions(deps.redisUrl, 'worker'),
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
  const readiness = config.worker.queues.includes('reconcile') ? startReadiness(deps, reconcileQueue, lifecycles, probe, reconcileMetrics) : undefined;
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

/**
 * Readiness apart from reconcile, in workers of the reconcile queue: the probe loop (every
 * `--probe-interval`) and the providers' exit watch (a local proxy process that exits is out of
 * discovery at once and gets a reconcile, which starts it again, without waiting for a probe).
 */
function startReadiness(
  deps: WorkerRoleDeps,
  reconcileQueue: Queue,
  lifecycles: ReadonlyMap<string, ProxyLifecycle>,
  probe: ReturnType<typeof reconcileProbe>,
  metrics: ReturnType<typeof createReconcileMetrics>,
): { probeLoop: ProbeLoop | undefined; close(): Promise<void> } {
  const { config, logger } = deps;
  const fleet = fleetOf(config.redis.prefix);
  const hooks: ReadinessHooks = {
    onProbe: (provider, ok, seconds) => metrics.probe(provider, ok, seconds),
    onEvicted: (provider, cause, readySeconds) => metrics.evicted(provider, cause, readySeconds),
  };
  const reconcileNow = (proxy: string): Promise<void> => requestReconcile(reconcileQueue, proxy);
  const failures: FailureDeps = { proxies: deps.proxies, rules: config.readiness, hooks, requestReconcile: reconcileNow };

  async function onExit(exit: InstanceExit): Promise<void> {
    const outcome = await recordFailure(failures, exit.owner.proxy, { cause: 'process-exited', message: exit.message, instanceId: exit.id, immediate: true });
    if (outcome === 'evicted') {
      logger.warn({ proxy: exit.owner.proxy, instance: exit.name, pid: exit.id }, 'proxy taken out of discovery: its process exited');
      return;
    }
    // Already out of discovery (a failed probe came first): still start it again now.
    const proxy = await deps.proxies.get(exit.owner.proxy);
    if (proxy && !proxy.metadata.deletionRequestedAt && proxy.status.instanceId === exit.id) await reconcileNow(proxy.name);
  }
  const unsubscribe: (() => void)[] = [];
  for (const lifecycle of lifecycles.values()) {
    const off = lifecycle.onInstanceExit?.((exit) => {
      if (exit.owner.fleet !== fleet) return;
      onExit(exit).catch((err: unknown) => logger.warn({ proxy: exit.owner.proxy, err: (err as Error).message }, 'could not record a proxy process exit'));
    });
    if (off) unsubscribe.push(off);
  }

  let redis: Redis | undefined;
  let probeLoop: ProbeLoop | undefined;
  if (config.readiness.intervalMs > 0) {
    redis = new Redis(redisOptions(deps.redisUrl, 'worker'));
    redis.on('error', (err) => logger.warn({ err: err.message }, 'probe loop redis connection error'));
    probeLoop = new ProbeLoop({
      proxies: deps.proxies,
      redis,
      prefix: config.redis.prefix,
      intervalMs: config.readiness.intervalMs,
      rules: config.readiness,
      probe,
      requestReconcile: reconcileNow,
      hooks,
      logger: logger.child({ component: 'probe-loop' }),
    });
    probeLoop.on('error', () => undefined);
    probeLoop.start();
  }
  return {
    probeLoop,
    async close() {
      for (const off of unsubscribe) off();
      await probeLoop?.close();
      redis?.disconnect();
    },
  };
}
