import { observerErrors } from '../src/http/connection-metrics.ts';
import type { Telemetry, Worker } from 'bullmq';
import pLimit from 'p-limit';
import type { Registry } from 'prom-client';
import type { RedisTarget } from '../queues/connection.ts';
import { closeAllBounded } from '../queues/bounded-close.ts';
import type { Consumer } from '../queues/consume.ts';
import { QUEUES } from '../queues/names.ts';
import { gcDeletesPerSecond, type AppConfig } from '../src/config/app.ts';
import type { Logger } from '../src/logging.ts';
import type { JobMetrics } from '../src/metrics/job-metrics.ts';
import { createReconcileMetrics } from '../src/metrics/proxy-metrics.ts';
import type { ProxyLifecycle } from '../src/providers/lifecycle.ts';
import type { Provider } from '../src/providers/types.ts';
import { fleetOf } from '../src/proxies/instance-name.ts';
import type { ProbeLoop } from '../src/readiness/probe-loop.ts';
import { reconcileProbe } from '../src/readiness/reconcile-probe.ts';
import type { ProxyStore } from '../src/store/proxy-store.ts';
import type { PoolStore } from '../src/store/pool-store.ts';
import type { MemberReplacements } from '../src/pools/member-replacements.ts';
import { BullmqWorkRequests } from '../src/jobs/bullmq-work-requests.ts';
import type { RedisClient } from '../src/redis/connections.ts';
import type { PoolUsageReader } from '../src/usage/usage-types.ts';
import { PickKeys } from '../src/pools/pick-keys.ts';
import { RedisPickDemand } from '../src/pools/pick-demand.ts';
import { poolHandlers } from './pool-processor.ts';
import { checkHandler } from './check-processor.ts';
import { consumeJobs, openJobQueue, type WorkJobHandler } from './consumer.ts';
import { gcHandler } from './gc-processor.ts';
import { startReadiness } from './readiness-watch.ts';
import { reconcileHandlers } from './reconcile-processor.ts';
import { createResultBatcher } from './result-batcher.ts';
import { noEvents, type EventSink } from '../src/events/event-sink.ts';
import type { Secrets } from '../src/secrets/secret-registry.ts';
import { RoleLifecycle, settleAll, type RoleStateObserver, type RoleStatus } from '../src/roles/role-lifecycle.ts';

export interface WorkerRoleDeps {
  config: AppConfig;
  redisTarget: RedisTarget | string;
  providers: ReadonlyMap<string, Provider>;
  proxies: ProxyStore;
  /** ProxyPools and their members' replacement requests (the pool reconcile runs on the reconcile queue). */
  pools: PoolStore;
  replacements: MemberReplacements;
  registry: Registry;
  /** The echo URL readiness probes use (known once the API of this process listens). */
  echoUrl: () => string;
  logger: Logger;
  jobMetrics: JobMetrics;
  /** Where reconcile, readiness and GC decisions are recorded. */
  events?: EventSink;
  /** The worker role's BullMQ telemetry; undefined when tracing is off. */
  telemetry?: Telemetry | undefined;
  /**
   * The process's secret registry (src/secrets), built by the entry point: told each proxy's
   * credentials by reconcile; its redaction applied to status, check results and failed jobs.
   */
  secrets: Secrets;
  /** Told each state the role enters (src/roles/role-lifecycle.ts). */
  onState?: RoleStateObserver | undefined;
  /** The roles' Redis: the pool reconcile reads autoscaled pools' pick counters and marks spent budgets for picks. */
  redis?: RedisClient | undefined;
  /** Pools' usage for their budgets (absent: budgets report no usage data and block nothing). */
  poolUsage?: PoolUsageReader | undefined;
}

export interface WorkerRole {
  /** starting → running → draining → stopped, or failed (a consumer stopped taking jobs, a close went wrong). */
  readonly status: RoleStatus;
  readonly workers: readonly Worker[];
  /** The readiness probe loop (workers of the reconcile queue with --probe-interval above 0). */
  readonly probeLoop: ProbeLoop | undefined;
  /** Stops taking jobs, waits the grace period, aborts the rest, closes connections; rejects with a ShutdownError naming what did not close. Idempotent. */
  close(): Promise<void>;
}

/** Check jobs a worker takes per check it runs at once (the others wait for their results to be stored). */
const CHECK_JOBS_PER_SLOT = 2;

/** `egress worker`: BullMQ workers for the configured queues, holding provider clients for life. */
export async function startWorkerRole(deps: WorkerRoleDeps): Promise<WorkerRole> {
  const { config, logger } = deps;
  const prefix = config.redis.prefix;
  const lifecycle = new RoleLifecycle('worker', deps.onState);
  const results = openJobQueue(deps, QUEUES.results);
  const reconcileQueue = openJobQueue(deps, QUEUES.reconcile);
  const work = new BullmqWorkRequests({ reconcile: reconcileQueue });
  const lifecycles = new Map<string, ProxyLifecycle>();
  for (const [name, p] of deps.providers) if (p.lifecycle) lifecycles.set(name, p.lifecycle);
  const reconcileMetrics = createReconcileMetrics(deps.registry);
  const events = deps.events ?? noEvents;
  const probe = reconcileProbe(deps.proxies, deps.echoUrl, config.readiness.timeoutMs);
  const handlers: Record<'checks' | 'reconcile' | 'gc', () => WorkJobHandler[]> = {
    checks: () => [
      checkHandler({
        providers: deps.providers,
        results: createResultBatcher(results),
        checkSlots: pLimit(config.worker.concurrency),
        logger,
        secrets: deps.secrets,
      }),
    ],
    reconcile: () => [
      ...reconcileHandlers({
        proxies: deps.proxies,
        metrics: reconcileMetrics,
        readiness: config.readiness,
        lifecycles,
        fleet: fleetOf(prefix),
        probe,
        logger,
        recheckMs: config.recheckMs,
        events,
        pools: deps.pools,
        secrets: deps.secrets,
        declaring: { providers: deps.providers, writer: deps.proxies },
      }),
      ...poolHandlers({
        pools: deps.pools,
        proxies: deps.proxies,
        replacements: deps.replacements,
        requestReconcile: (proxy) => work.reconcileProxy(proxy),
        failedReplaceAfterMs: config.readiness.replaceAfterMs,
        events,
        logger,
        demand: deps.redis ? new RedisPickDemand(deps.redis, new PickKeys(prefix)) : undefined,
        usage: deps.poolUsage,
      }),
    ],
    gc: () => [
      gcHandler({
        proxies: deps.proxies,
        lifecycles,
        fleet: fleetOf(prefix),
        graceMs: config.gcGraceMs,
        deletesPerSecond: (provider) => gcDeletesPerSecond(config, provider),
        registry: deps.registry,
        logger,
        events,
      }),
    ],
  };
  const consumers: Consumer[] = [];
  const closeQueues = (): Promise<void> => closeAllBounded([results, reconcileQueue], { logger });
  try {
    for (const queue of config.worker.queues) {
      // A check job holds its place until its result is on the `results` queue; twice the jobs
      // let the next checks run meanwhile, while at most --concurrency checks run at once.
      const concurrency = queue === 'checks' ? config.worker.concurrency * CHECK_JOBS_PER_SLOT : config.worker.concurrency;
      const consumer = await consumeJobs(deps, work, QUEUES[queue], handlers[queue](), concurrency);
      consumers.push(consumer);
      lifecycle.watch(consumer.stopped);
    }
  } catch (err) {
    lifecycle.fail(err);
    await lifecycle
      .close([() => settleAll(consumers.map((c) => c.close())), closeQueues])
      .catch((closeErr: unknown) => logger.warn({ err: (closeErr as Error).message }, 'closing a worker that did not start'));
    throw err;
  }
  const readiness = config.worker.queues.includes('reconcile')
    ? startReadiness(
        { config, redisTarget: deps.redisTarget, proxies: deps.proxies, logger, events, observerErrors: observerCounter(deps.registry), secrets: deps.secrets },
        work,
        lifecycles,
        probe,
        reconcileMetrics,
      )
    : undefined;
  logger.info(
    { queues: config.worker.queues, concurrency: config.worker.concurrency, probeIntervalMs: readiness?.probeLoop ? config.readiness.intervalMs : 0 },
    'worker started',
  );
  lifecycle.started();
  return {
    status: lifecycle,
    workers: consumers.map((c) => c.worker),
    probeLoop: readiness?.probeLoop,
    close: () =>
      lifecycle.close([
        () => readiness?.close(),
        // Every consumer is closed, whatever another's close did.
        () => settleAll(consumers.map((c) => c.close())),
        closeQueues,
      ]),
  };
}

/** `proxy_operator_observer_errors_total` as the readiness hooks call it. */
function observerCounter(registry: Registry): (where: string, code: string) => void {
  const counter = observerErrors(registry);
  return (where, code) => counter.inc({ where, code });
}
