import type { PoolUsageReader } from '../usage/usage-types.ts';
import { startApiRole, type ApiRole } from '../api/api-role.ts';
import type { AppConfig } from '../config/app.ts';
import { egressGuards } from '../egress/policy-config.ts';
import type { RedisEventStore } from '../events/redis-event-store.ts';
import type { Logger } from '../logging.ts';
import { createJobMetrics, type JobMetrics } from '../metrics/job-metrics.ts';
import { startMetricsServer } from '../metrics/metrics-server.ts';
import type { Registry } from 'prom-client';
import { createRegistry } from '../metrics/registry.ts';
import { registerSchedulerGauges } from '../metrics/scheduler-gauges.ts';
import { createProviders, type ProviderFactory } from '../providers/create-provider.ts';
import { fleetOf } from '../proxies/instance-name.ts';
import { createProxyResolver } from '../proxies/proxy-resolver.ts';
import { trafficSources } from '../providers/traffic-sources.ts';
import { RemoteBaselines } from '../proxies/remote-baselines.ts';
import { remoteTrafficSources } from '../proxies/remote-traffic.ts';
import { startTrafficCollector } from '../usage/traffic-collector.ts';
import type { ProxyResolver } from '../usage/traffic-source.ts';
import { DEFAULT_USAGE_SETTINGS } from '../config/usage-config.ts';
import type { Provider } from '../providers/types.ts';
import { echoUrlAdvice } from '../readiness/echo-url-advice.ts';
import { redisListeners } from '../redis/connections.ts';
import { boundedStep, settleAll, type RoleStatus, type RoleStateObserver } from '../roles/role-lifecycle.ts';
import type { ShutdownPlan } from '../roles/shutdown-plan.ts';
import { SchedulerRole } from '../scheduler/scheduler-role.ts';
import type { SecretRegistry } from '../secrets/secret-registry.ts';
import type { Stores } from '../store/create-stores.ts';
import { inRole } from '../telemetry/spans.ts';
import type { TracingRuntime } from '../telemetry/tracing.ts';
import { startPublisherRole } from '../../workers/publisher-role.ts';
import { startWorkerRole, type WorkerRole } from '../../workers/worker-role.ts';
import type { RolesRedis } from './roles-redis.ts';
import { lifeRecordingSink } from './usage-parts.ts';
import type { UsageStore } from '../usage/usage-store.ts';

export type RoleName = 'scheduler' | 'worker' | 'publisher' | 'api';

/** How long closing the metrics listener may take. */
const CLOSE_MS = 5000;

/** What every role of a process is built from: its configuration, Redis, stores, events, tracing and secrets. */
export interface RoleParts {
  config: AppConfig;
  logger: Logger;
  redis: RolesRedis;
  stores: Stores;
  events: RedisEventStore;
  /** Traffic and instance lives, read by `GET /v1/usage` (docs/usage.md). */
  usage: UsageStore;
  tracing: TracingRuntime;
  secrets: SecretRegistry;
  plan: ShutdownPlan;
  onState: RoleStateObserver;
  /** Tests inject providers with hanging or failing checks; the product has no fake provider. */
  providerFactory?: ProviderFactory | undefined;
  /** Pools' usage for their budgets (the worker's pool reconcile); absent: budgets report no usage data. */
  poolUsage?: PoolUsageReader | undefined;
  /** The process's soft limit on open files: the listeners' connection caps are derived from it. */
  openFiles?: number | undefined;
}

export interface StartedRoles {
  readonly api: ApiRole | undefined;
  readonly scheduler: SchedulerRole | undefined;
  readonly worker: WorkerRole | undefined;
  readonly providers: ReadonlyMap<string, Provider>;
  readonly statuses: ReadonlyMap<RoleName, RoleStatus>;
}

/** `http://127.0.0.1:8080` → its host (without brackets) and port. */
function listenerOf(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port) };
}

/**
 * Where readiness probes reach through each proxy: `--echo-url`, else this process's API (`up`),
 * else 127.0.0.1 on the API's default port (a standalone worker has no --port: the API it means
 * is assumed at http://127.0.0.1:8080).
 */
export function echoUrlFor(config: Pick<AppConfig, 'echoUrl' | 'api'>, apiUrl: string | undefined): string {
  return config.echoUrl ?? `${apiUrl ?? `http://127.0.0.1:${config.api.port}`}/v1/echo`;
}

/**
 * Starts the chosen roles on their parts, each adding its close to the plan. The API and the
 * metrics listener start before the providers: their addresses are among the listeners every
 * proxy must refuse (ProviderDeps.egress), and the echo URL needs the API's port.
 */
export async function startRoles(roles: readonly RoleName[], parts: RoleParts): Promise<StartedRoles> {
  const { config, logger, plan } = parts;
  const registry = createRegistry();
  const jobMetrics = createJobMetrics(registry);
  const statuses = new Map<RoleName, RoleStatus>();
  const api = roles.includes('api') ? await startApi(parts, registry) : undefined;
  if (api) {
    statuses.set('api', api.status);
    plan.add(() => api.close());
  }
  let metricsListener: { host: string; port: number } | undefined;
  if (config.metricsPort !== undefined && !roles.includes('api')) {
    const metrics = await startMetricsServer(registry, config.api.host, config.metricsPort, {
      tokens: config.api.tokens,
      allowedHosts: config.api.allowedHosts,
      logger,
      openFiles: parts.openFiles,
    });
    plan.add(boundedStep('the metrics listener', CLOSE_MS, () => metrics.close()));
    metricsListener = listenerOf(metrics.url);
    logger.info({ url: `${metrics.url}/metrics` }, 'metrics listening');
  }
  const echoUrl = (): string => echoUrlFor(config, api?.url);
  let providers: ReadonlyMap<string, Provider> = new Map();
  if (roles.includes('worker')) {
    const egress = egressGuards({
      redis: redisListeners(parts.redis.target),
      ...(api ? { api: listenerOf(api.url) } : {}),
      ...(metricsListener ? { metrics: metricsListener } : {}),
      echoUrl: echoUrl(),
    });
    const proxyResolver = createProxyResolver({ reader: parts.stores.proxies, fleet: fleetOf(config.redis.prefix), logger });
    const built = await createProviders(
      config.providers,
      { logger, registry, dataDir: config.dataDir, egress, secrets: parts.secrets, proxyResolver },
      parts.providerFactory,
    );
    providers = built;
    plan.add(() => settleAll([...built.values()].map((p) => p.close())));
    startCollector(parts, proxyResolver);
  }
  let scheduler: SchedulerRole | undefined;
  let worker: WorkerRole | undefined;
  for (const role of roles) {
    if (role === 'worker') {
      worker = await startWorker(parts, { providers, registry, jobMetrics, echoUrl });
      statuses.set(role, worker.status);
    } else if (role === 'publisher') statuses.set(role, await startPublisher(parts, jobMetrics));
    else if (role === 'scheduler') {
      scheduler = startScheduler(parts, registry);
      statuses.set(role, scheduler.status);
    }
  }
  if (roles.includes('worker')) {
    const url = echoUrl();
    const advice = echoUrlAdvice(config.providers, url);
    if (advice) logger.warn({ echoUrl: url }, advice);
  }
  return { api, scheduler, worker, providers, statuses };
}

/**
 * The traffic collector (docs/usage.md#traffic): the proxies' counts into the usage store every
 * `usage.collectInterval`: the local-type providers' from their files, the remote ones' (kvm, gcp,
 * kubernetes) from the proxies themselves, by the one worker holding each provider's lease.
 * Closed after the roles (the plan runs in reverse), with one last bounded collection.
 */
function startCollector(parts: RoleParts, resolve: ProxyResolver): void {
  const { config } = parts;
  const intervalMs = (config.usage ?? DEFAULT_USAGE_SETTINGS).collectIntervalMs;
  const logger = parts.logger.child({ component: 'traffic-collector' });
  const baselines = new RemoteBaselines(parts.redis.client, config.redis.prefix);
  const remote = remoteTrafficSources(config.providers, {
    proxies: parts.stores.proxies,
    baselines,
    fleet: fleetOf(config.redis.prefix),
    logger,
    leaseMs: 3 * intervalMs,
  });
  const sources = [...trafficSources(config.providers, config.dataDir), ...remote];
  if (sources.length === 0) return;
  // After the collector's last collection (the plan runs in reverse): another worker may collect at once.
  if (remote.length > 0) parts.plan.add(() => baselines.release(AbortSignal.timeout(CLOSE_MS)).catch(() => undefined));
  const collector = startTrafficCollector({
    sources,
    resolve,
    sink: (records, signal) => parts.usage.addTraffic(records, signal),
    logger,
    intervalMs,
  });
  parts.plan.add(() => collector.close(AbortSignal.timeout(CLOSE_MS)).catch(() => undefined));
}

function startApi(parts: RoleParts, registry: Registry): Promise<ApiRole> {
  const { config, stores } = parts;
  return inRole('api', () =>
    startApiRole({
      config,
      redisTarget: parts.redis.target,
      redis: parts.redis.client,
      store: stores.status,
      proxies: stores.proxies,
      pools: stores.pools,
      replacements: stores.replacements,
      registry,
      events: parts.events,
      usage: parts.usage,
      logger: parts.logger.child({ role: 'api' }),
      telemetry: parts.tracing.bullmq('api'),
      openFiles: parts.openFiles,
      onState: parts.onState,
    }),
  );
}

async function startWorker(
  parts: RoleParts,
  built: { providers: ReadonlyMap<string, Provider>; registry: Registry; jobMetrics: JobMetrics; echoUrl: () => string },
): Promise<WorkerRole> {
  const { config, stores } = parts;
  const worker = await inRole('worker', () =>
    startWorkerRole({
      config,
      redisTarget: parts.redis.target,
      redis: parts.redis.client,
      poolUsage: parts.poolUsage,
      providers: built.providers,
      proxies: stores.proxies,
      pools: stores.pools,
      replacements: stores.replacements,
      registry: built.registry,
      echoUrl: built.echoUrl,
      logger: parts.logger.child({ role: 'worker' }),
      jobMetrics: built.jobMetrics,
      events: lifeRecordingSink(parts.events.sink('worker'), { ...parts, proxies: stores.proxies, registry: built.registry }),
      telemetry: parts.tracing.bullmq('worker'),
      secrets: parts.secrets,
      onState: parts.onState,
    }),
  );
  parts.plan.add(() => worker.close());
  return worker;
}

async function startPublisher(parts: RoleParts, jobMetrics: JobMetrics): Promise<RoleStatus> {
  const publisher = await inRole('publisher', () =>
    startPublisherRole({
      config: parts.config,
      redisTarget: parts.redis.target,
      store: parts.stores.status,
      logger: parts.logger.child({ role: 'publisher' }),
      jobMetrics,
      events: parts.events.sink('publisher'),
      telemetry: parts.tracing.bullmq('publisher'),
      secrets: parts.secrets,
      onState: parts.onState,
    }),
  );
  parts.plan.add(() => publisher.close());
  return publisher.status;
}

function startScheduler(parts: RoleParts, registry: Registry): SchedulerRole {
  const scheduler = new SchedulerRole({
    config: parts.config,
    redisTarget: parts.redis.target,
    redis: parts.redis.client,
    store: parts.stores.status,
    logger: parts.logger.child({ role: 'scheduler' }),
    events: parts.events.sink('scheduler'),
    telemetry: parts.tracing.bullmq('scheduler'),
    proxyChanges: parts.stores.proxyChanges,
    onState: parts.onState,
  });
  // A failed lead is the role's failure (its status); the event only keeps EventEmitter from throwing it.
  scheduler.on('error', () => undefined);
  void inRole('scheduler', () => scheduler.start());
  registerSchedulerGauges(registry, scheduler, parts.config.checks.intervalMs);
  parts.plan.add(() => scheduler.close());
  return scheduler;
}
