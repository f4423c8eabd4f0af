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
import { startWorkerRole, type WorkerRole } from '../../workers/worker-role.ts';
import { echoUrlAdvice } from '../readiness/echo-url-advice.ts';
import { egressGuards } from '../egress/policy-config.ts';
import { RedisEventStore } from '../events/redis-event-store.ts';
import { inRole } from '../telemetry/spans.ts';
import { startTracing, type TracingRuntime } from '../telemetry/tracing.ts';
import { SecretRegistry } from '../secrets/secret-registry.ts';
import type { RedisTarget } from '../../queues/connection.ts';
import { EgressError } from '../errors.ts';
import { boundedStep, runShutdownSteps, settleAll, ShutdownError, type RoleState, type RoleStatus, type ShutdownStep } from '../roles/role-lifecycle.ts';

/**
 * How long each shutdown step that has no bound of its own (a store, a connection, the tracing
 * exporter) may take. The roles bound their closes themselves (their grace period for running
 * jobs, then BullMQ's bounds), the private redis-server its stop, the providers theirs.
 */
const STEP_MS = 5000;

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
  readonly worker: WorkerRole | undefined;
  readonly providers: ReadonlyMap<string, Provider>;
  /** Tracing of this process (TRACING_OFF without an OTLP endpoint). */
  readonly tracing: TracingRuntime;
  /** Each role's state (starting → running → draining → stopped | failed) and failure. */
  readonly roles: ReadonlyMap<RoleName, RoleStatus>;
  /**
   * Settles when the roles end (the model: Temporal's `Worker.run()`): resolves once every role
   * stopped after `close()`; rejects as soon as one fails (a RoleFailedError naming the role and
   * its cause), or when the private redis-server exits under the roles (PrivateRedisLostError).
   * It closes nothing: the caller, seeing it reject, calls `close()`.
   */
  run(): Promise<void>;
  /**
   * Closes roles in reverse start order, then connections, then the private Redis; every step
   * runs, each bounded. Rejects with a ShutdownError listing every step that failed. Idempotent.
   */
  close(): Promise<void>;
}

/** The private redis-server exited while the roles used it (`ERR_REDIS_LOST`): nothing of this process can go on. */
export class PrivateRedisLostError extends EgressError {
  constructor(pid: number, how: string) {
    super('ERR_REDIS_LOST', `the private redis-server (pid ${pid}) ${how} while the roles used it`, { retryable: false });
  }
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
  /** Told every state each role enters, with a failure's cause (besides the log line each transition writes). */
  onRoleState?: (role: RoleName, state: RoleState, cause?: Error) => void;
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
  const closers: ShutdownStep[] = [];
  const secrets = options.secrets ?? new SecretRegistry();
  secrets.set('api-tokens', config.api.tokens);
  let closing: Promise<void> | undefined;
  let requestClose: () => void = () => undefined;
  const closeRequested = new Promise<void>((resolve) => {
    requestClose = resolve;
  });
  const closeAll = (): Promise<void> =>
    (closing ??= (async () => {
      requestClose();
      const errors = await runShutdownSteps([...closers].reverse());
      for (const err of errors) logger.error({ err: err.message, code: (err as { code?: unknown }).code }, 'error while shutting down');
      if (errors.length > 0) throw new ShutdownError('the shutdown', errors);
    })());
  const statuses = new Map<RoleName, RoleStatus>();
  const onState = (role: string, state: RoleState, cause?: Error): void => {
    if (state === 'failed') logger.error({ role, state, err: cause?.message }, 'role failed');
    else logger.info({ role, state }, `role ${state}`);
    options.onRoleState?.(role as RoleName, state, cause);
  };
  // What ends the process besides its roles: the private redis-server exiting under them.
  let lost: (err: Error) => void = () => undefined;
  const redisLost = new Promise<never>((_, reject) => {
    lost = reject;
  });
  redisLost.catch(() => undefined);
  try {
    // First in, last out: spans of the shutdown itself are still exported.
    const tracing = await startTracing(config.telemetry, roles, secrets);
    closers.push(boundedStep('the tracing exporter', STEP_MS, () => tracing.shutdown()));
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
      void own.exited.then(({ code, signal }) => {
        if (closing) return;
        const err = new PrivateRedisLostError(own.pid, signal ? `was killed by ${signal}` : `exited with code ${code}`);
        logger.error({ redisPid: own.pid, code, signal }, err.message);
        lost(err);
      });
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
    closers.push(boundedStep('the Redis connection', STEP_MS, () => closeRedis(redis)));
    await warnUnlessNoEviction(redis, logger);
    // ProviderHealth and Proxy objects: Redis, or Kubernetes custom resources (`--store`).
    const stores = await createStores(config.store, redis, config.redis.prefix, logger, secrets);
    const store = stores.status;
    closers.push(boundedStep('the status store', STEP_MS, () => store.close()));
    closers.push(boundedStep('the proxy store', STEP_MS, () => stores.proxies.close()));
    closers.push(boundedStep('the pool store', STEP_MS, () => stores.pools.close()));
    if (config.store?.kind === 'kubernetes') logger.info({ namespace: config.store.namespace }, 'ProviderHealth and Proxy objects live in Kubernetes');
    // One event stream per fleet; each role records under its own name. Closed after the roles (closers run in reverse).
    const events = new RedisEventStore(redis, config.redis.prefix, config.events, logger.child({ component: 'events' }), secrets);
    closers.push(boundedStep('the event store', STEP_MS, () => events.close()));
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
          onState,
        }),
      );
      api = a;
      statuses.set('api', a.status);
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
      closers.push(boundedStep('the metrics listener', STEP_MS, () => metrics.close()));
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
      closers.push(() => settleAll([...built.values()].map((p) => p.close())));
    }
    let scheduler: SchedulerRole | undefined;
    let worker: WorkerRole | undefined;
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
            onState,
          }),
        );
        statuses.set(role, w.status);
        worker = w;
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
            onState,
          }),
        );
        statuses.set(role, p.status);
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
          onState,
        });
        // A failed lead is the role's failure (its status, below); the event only keeps EventEmitter from throwing it.
        s.on('error', () => undefined);
        statuses.set(role, s.status);
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
    // Roles stop only after close(); a process without roles ends with its close too.
    const running = Promise.all([...statuses.values()].map((st) => st.run())).then(async () => {
      await closeRequested;
    });
    const ended = Promise.race([running, redisLost]);
    ended.catch(() => undefined);
    return {
      redisUrl,
      api,
      scheduler,
      worker,
      providers,
      tracing,
      roles: statuses,
      run: () => ended,
      close: closeAll,
    };
  } catch (err) {
    // The start's own error is what the caller hears; the shutdown's are logged (closeAll).
    await closeAll().catch(() => undefined);
    throw err;
  }
}
