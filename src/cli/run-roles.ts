import { startApiRole, type ApiRole } from '../api/api-role.ts';
import type { AppConfig } from '../config/app.ts';
import type { Logger } from '../logging.ts';
import { createJobMetrics } from '../metrics/job-metrics.ts';
import { startMetricsServer } from '../metrics/metrics-server.ts';
import { createRegistry } from '../metrics/registry.ts';
import { createProviders, type ProviderFactory } from '../providers/create-provider.ts';
import type { Provider } from '../providers/types.ts';
import { startPublisherRole } from '../../workers/publisher-role.ts';
import { closeRedis, createRedis, redisListeners, redisTargetOf, warnUnlessNoEviction, type RedisClient } from '../redis/connections.ts';
import { startPrivateRedis, type PrivateRedis } from '../redis/private-redis.ts';
import { SchedulerRole } from '../scheduler/scheduler-role.ts';
import { registerSchedulerGauges } from '../metrics/scheduler-gauges.ts';
import { createStores } from '../store/create-stores.ts';
import { startWorkerRole } from '../../workers/worker-role.ts';
import { echoUrlAdvice } from '../readiness/echo-url-advice.ts';
import { egressGuards } from '../egress/policy-config.ts';
import { RedisEventStore } from '../events/redis-event-store.ts';
import { inRole } from '../telemetry/spans.ts';
import { startTracing, type TracingRuntime } from '../telemetry/tracing.ts';
import { SecretRegistry } from '../secrets/secret-registry.ts';
import type { RedisTarget } from '../../queues/connection.ts';

/** `http://127.0.0.1:8080` → its host (without brackets) and port. */
function listenerOf(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port) };
}

export type RoleName = 'scheduler' | 'worker' | 'publisher' | 'api';

export interface RunningRoles {
  /** The standalone Redis the roles use (the private one's URL carries its password); undefined on a cluster. */
  readonly redisUrl: string | undefined;
  readonly api: ApiRole | undefined;
  readonly scheduler: SchedulerRole | undefined;
  readonly providers: ReadonlyMap<string, Provider>;
  /** Tracing of this process (TRACING_OFF without an OTLP endpoint). */
  readonly tracing: TracingRuntime;
  /** Closes roles in reverse start order, then connections, then the private Redis. */
  close(): Promise<void>;
}

export interface RunRolesOptions {
  /** Tests inject providers with hanging or failing checks; the product has no fake provider. */
  providerFactory?: ProviderFactory;
  /** Tests start the private Redis without the parent-death signal, to leave an orphan behind. */
  privateRedis?: { dieWithOwner?: boolean };
  /** The process's soft limit on open files (raised at start by the entry point): the listeners' connection caps are derived from it. */
  openFiles?: number;
  /**
   * The process's one secret registry (src/secrets), built by the entry point with its logger
   * (`createLogger({ secrets })`), so that log lines pass the same redaction. Absent (tests that
   * build a logger of their own): runRoles builds one.
   */
  secrets?: SecretRegistry;
}

/** Tells the registry the secrets a process's configuration holds: the API tokens and the Redis password. */
function registerConfigSecrets(secrets: SecretRegistry, config: AppConfig, target: RedisTarget): void {
  secrets.set('api-tokens', config.api.tokens);
  const redisPassword = (): string | undefined => {
    if (target.kind === 'cluster') return target.password;
    const u = new URL(target.url);
    return u.password ? decodeURIComponent(u.password) : undefined;
  };
  secrets.set('redis', [redisPassword(), config.redis.password]);
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
 * The composition root of a long-running process: builds what the chosen roles need, starts
 * them, and returns one handle that closes everything (each step guarded, so one failure does
 * not leak the rest).
 */
export async function runRoles(config: AppConfig, roles: readonly RoleName[], logger: Logger, options: RunRolesOptions = {}): Promise<RunningRoles> {
  const closers: (() => Promise<void>)[] = [];
  const secrets = options.secrets ?? new SecretRegistry();
  secrets.set('api-tokens', config.api.tokens);
  const closeAll = async (): Promise<void> => {
    for (const close of closers.reverse()) {
      try {
        await close();
      } catch (err) {
        logger.warn({ err: (err as Error).message }, 'error while shutting down');
      }
    }
  };
  try {
    // First in, last out: spans of the shutdown itself are still exported.
    const tracing = await startTracing(config.telemetry, roles, secrets);
    closers.push(() => tracing.shutdown());
    if (tracing.enabled) logger.info({ tracesUrl: config.telemetry?.tracesUrl, protocol: config.telemetry?.protocol, roles }, 'tracing on');
    let redisUrl = config.redis.url;
    if (redisUrl === undefined && config.redis.clusterNodes === undefined) {
      const own: PrivateRedis = await startPrivateRedis({
        dataDir: config.dataDir,
        command: process.argv.slice(1).join(' '),
        logger: logger.child({ component: 'private-redis' }),
        ...options.privateRedis,
      });
      closers.push(() => own.close());
      // The URL carries the password: every connection of this process uses it, no log line shows it.
      redisUrl = own.url;
      logger.info({ url: own.displayUrl, redisPid: own.pid, dir: own.dir, diesWithOwner: own.diesWithOwner }, 'started a private redis-server');
      if (!own.diesWithOwner) {
        logger.warn(
          'setpriv --pdeathsig is not available: if this process is killed with -9, its redis-server keeps running until the next start on this data directory stops it',
        );
      }
    }
    const redisTarget = redisTargetOf(config.redis, redisUrl);
    registerConfigSecrets(secrets, config, redisTarget);
    if (redisTarget.kind === 'cluster')
      logger.info({ nodes: redisTarget.nodes.map((n) => `${n.host}:${n.port}`), tls: redisTarget.tls }, 'using a Redis Cluster');
    const redis: RedisClient = createRedis(redisTarget, 'worker', logger.child({ component: 'redis' }));
    closers.push(() => closeRedis(redis));
    await warnUnlessNoEviction(redis, logger);
    // ProviderHealth and Proxy objects: Redis, or Kubernetes custom resources (`--store`).
    const stores = await createStores(config.store, redis, config.redis.prefix, logger, secrets);
    const store = stores.status;
    closers.push(() => store.close());
    closers.push(() => stores.proxies.close());
    closers.push(() => stores.pools.close());
    if (config.store?.kind === 'kubernetes') logger.info({ namespace: config.store.namespace }, 'ProviderHealth and Proxy objects live in Kubernetes');
    // One event stream per fleet; each role records under its own name. Closed after the roles (closers run in reverse).
    const events = new RedisEventStore(redis, config.redis.prefix, config.events, logger.child({ component: 'events' }), secrets);
    closers.push(() => events.close());
    const registry = createRegistry();
    const jobMetrics = createJobMetrics(registry);

    // The API and the metrics listener start before the providers: their addresses are among the
    // listeners every proxy must refuse (ProviderDeps.egress), and the echo URL needs the API's port.
    let api: ApiRole | undefined;
    if (roles.includes('api')) {
      const a = await inRole('api', () =>
        startApiRole({
          config,
          redisTarget,
          redis,
          store,
          proxies: stores.proxies,
          pools: stores.pools,
          replacements: stores.replacements,
          registry,
          events,
          logger: logger.child({ role: 'api' }),
          telemetry: tracing.bullmq('api'),
          openFiles: options.openFiles,
        }),
      );
      api = a;
      closers.push(() => a.close());
    }
    let metricsListener: { host: string; port: number } | undefined;
    if (config.metricsPort !== undefined && !roles.includes('api')) {
      const metrics = await startMetricsServer(registry, config.api.host, config.metricsPort, {
        tokens: config.api.tokens,
        allowedHosts: config.api.allowedHosts,
        logger,
        openFiles: options.openFiles,
      });
      closers.push(() => metrics.close());
      metricsListener = listenerOf(metrics.url);
      logger.info({ url: `${metrics.url}/metrics` }, 'metrics listening');
    }
    const echoUrl = (): string => echoUrlFor(config, api?.url);

    let providers: ReadonlyMap<string, Provider> = new Map();
    if (roles.includes('worker')) {
      const egress = egressGuards({
        redis: redisListeners(redisTarget),
        ...(api ? { api: listenerOf(api.url) } : {}),
        ...(metricsListener ? { metrics: metricsListener } : {}),
        echoUrl: echoUrl(),
      });
      const built = await createProviders(config.providers, { logger, registry, dataDir: config.dataDir, egress, secrets }, options.providerFactory);
      providers = built;
      closers.push(async () => {
        await Promise.allSettled([...built.values()].map((p) => p.close()));
      });
    }
    let scheduler: SchedulerRole | undefined;
    for (const role of roles) {
      const log = logger.child({ role });
      if (role === 'worker') {
        const proxies = stores.proxies;
        const w = await inRole(role, () =>
          startWorkerRole({
            config,
            redisTarget,
            providers,
            proxies,
            pools: stores.pools,
            replacements: stores.replacements,
            registry,
            echoUrl,
            logger: log,
            jobMetrics,
            events: events.sink('worker'),
            telemetry: tracing.bullmq(role),
            secrets,
          }),
        );
        closers.push(() => w.close());
      } else if (role === 'publisher') {
        const p = await inRole(role, () =>
          startPublisherRole({
            config,
            redisTarget,
            store,
            logger: log,
            jobMetrics,
            events: events.sink('publisher'),
            telemetry: tracing.bullmq(role),
            secrets,
          }),
        );
        closers.push(() => p.close());
      } else if (role === 'scheduler') {
        const s = new SchedulerRole({
          config,
          redisTarget,
          redis,
          store,
          logger: log,
          events: events.sink('scheduler'),
          telemetry: tracing.bullmq(role),
          proxyChanges: stores.proxyChanges,
        });
        s.on('error', () => undefined);
        inRole(role, () => s.start());
        registerSchedulerGauges(registry, s, config.checks.intervalMs);
        scheduler = s;
        closers.push(() => s.close());
      }
    }
    if (roles.includes('worker')) {
      const url = echoUrl();
      const advice = echoUrlAdvice(config.providers, url);
      if (advice) logger.warn({ echoUrl: url }, advice);
    }
    let closing: Promise<void> | undefined;
    return {
      redisUrl,
      api,
      scheduler,
      providers,
      tracing,
      close() {
        closing ??= closeAll();
        return closing;
      },
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
