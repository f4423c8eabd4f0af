import type { AddressInfo } from 'node:net';
import type { ServerType } from '@hono/node-server';
import { QueueEvents, type Queue } from 'bullmq';
import type { RedisClient } from '../redis/connections.ts';
import type { Registry } from 'prom-client';
import { redisOptions, type RedisTarget } from '../../queues/connection.ts';
import { ALL_QUEUES, QUEUES } from '../../queues/names.ts';
import { openQueue } from '../../queues/consume.ts';
import { closeAllBounded, closeBounded } from '../../queues/bounded-close.ts';
import { RoleLifecycle, type RoleStateObserver, type RoleStatus } from '../roles/role-lifecycle.ts';
import type { AppConfig } from '../config/app.ts';
import { JobInspector } from '../jobs/job-inspection.ts';
import type { Logger } from '../logging.ts';
import { registerProviderGauges } from '../metrics/provider-gauges.ts';
import { registerQueueGauges } from '../metrics/queue-gauges.ts';
import { registerProxyGauge } from '../metrics/proxy-metrics.ts';
import type { ProxyStore } from '../store/proxy-store.ts';
import type { PoolStore } from '../store/pool-store.ts';
import type { MemberReplacements } from '../pools/member-replacements.ts';
import { registerPoolGauges } from '../metrics/pool-gauges.ts';
import { registerUsageGauges } from '../metrics/usage-metrics.ts';
import type { UsageStore } from '../usage/usage-store.ts';
import type { StatusStore } from '../store/status-store.ts';
import { listenHttp } from '../http/listen.ts';
import { effectiveLimits } from '../http/connection-limits.ts';
import { connectionRefusals } from '../http/connection-metrics.ts';
import { ECHO_PATH } from '../readiness/echo.ts';
import { createApiApp } from './app.ts';
import { HostAllowList } from '../http/request-guards.ts';
import type { EventStore } from '../events/event-sink.ts';
import type { Telemetry } from 'bullmq';
import { DEFAULT_PICK_SETTINGS } from '../config/app.ts';
import { createFeedbackMetrics } from '../metrics/feedback-metrics.ts';
import { FeedbackRecorder } from '../pools/feedback-service.ts';
import { FeedbackRateLimit } from '../pools/feedback-rate-limit.ts';
import { PickKeys } from '../pools/pick-keys.ts';
import { PoolMemberCache } from '../pools/pick-members.ts';
import { PoolPicker } from '../pools/pick-service.ts';
import { BullmqWorkRequests } from '../jobs/bullmq-work-requests.ts';
import type { EventSink } from '../events/event-sink.ts';
import { memberBlocked, replacementRequested } from '../events/feedback-events.ts';

export interface ApiRoleDeps {
  config: AppConfig;
  redisTarget: RedisTarget | string;
  redis: RedisClient;
  store: StatusStore;
  /** Proxy objects (the process's store, Redis or Kubernetes); the caller closes it. */
  proxies: ProxyStore;
  /** ProxyPools (the caller closes the store) and their members' replacement requests (for picks and ban feedback too). */
  pools: PoolStore;
  replacements: MemberReplacements;
  registry: Registry;
  logger: Logger;
  /** The fleet's events: read by `GET /v1/events`, written by applies and deletions. */
  events: EventStore;
  /** Usage and cost: `GET /v1/usage` and the running-instances gauge; absent: neither. */
  usage?: UsageStore | undefined;
  /** BullMQ telemetry for the API's producers (ad-hoc checks, reconciles); undefined when tracing is off. */
  telemetry?: Telemetry | undefined;
  /** The process's soft limit on open files: the API holds at most half of it in connections. */
  openFiles?: number | undefined;
  /** Told each state the role enters (src/roles/role-lifecycle.ts). */
  onState?: RoleStateObserver | undefined;
}

export interface ApiRole {
  /** The base URL it listens on (`http://127.0.0.1:8080`). */
  readonly url: string;
  /** starting → running → draining → stopped, or failed (it did not start, its close went wrong). */
  readonly status: RoleStatus;
  /** Stops listening, closes its queues (bounded); rejects with a ShutdownError naming what did not close. Idempotent. */
  close(): Promise<void>;
}

/** The API's connections take at most this share of the open-files limit; the rest is Redis, files, probes. */
const API_FILES_SHARE = 0.5;

/** `egress api`: the HTTP API, Bull Board and /metrics. */
export async function startApiRole(deps: ApiRoleDeps): Promise<ApiRole> {
  const { config, logger } = deps;
  const lifecycle = new RoleLifecycle('api', deps.onState);
  const queues = ALL_QUEUES.map((name) =>
    openQueue(name, {
      connection: redisOptions(deps.redisTarget, 'producer'),
      prefix: config.redis.prefix,
      settings: config,
      logger,
      telemetry: deps.telemetry,
    }),
  );
  const checks = queues.find((q) => q.name === QUEUES.checks) as Queue;
  const checkEvents = new QueueEvents(QUEUES.checks, { connection: redisOptions(deps.redisTarget, 'worker'), prefix: config.redis.prefix });
  checkEvents.on('error', (err) => logger.warn({ err: err.message }, 'queue events connection error'));
  const proxies = deps.proxies;
  // Whatever fails from here on (Redis, a busy port) closes what was opened above: a queue left
  // open keeps reconnecting and keeps the process alive. Bounded: after a Redis outage QueueEvents'
  // close can wait on its blocked reader for good.
  const closeOpened = (): Promise<void> => closeAllBounded([checkEvents, ...queues], { logger });
  let server: ServerType;
  let url: string;
  try {
    await checkEvents.waitUntilReady();
    registerProviderGauges(deps.registry, deps.store);
    registerQueueGauges(deps.registry, queues);
    registerProxyGauge(
      deps.registry,
      proxies,
      config.providers.map((p) => p.name),
    );
    registerPoolGauges(deps.registry, deps.pools);
    if (deps.usage) registerUsageGauges(deps.registry, deps.usage);
    const hosts = new HostAllowList([...config.api.allowedHosts, ...echoHost(config.echoUrl)]);
    const eventSink = deps.events.sink('api');
    const reconcile = queues.find((q) => q.name === QUEUES.reconcile);
    const work = new BullmqWorkRequests({ reconcile, checks, checkEvents });
    const app = createApiApp({
      store: deps.store,
      proxies,
      pools: deps.pools,
      replacements: deps.replacements,
      providers: config.providers.map((p) => p.name),
      checks,
      checkEvents,
      work,
      queues,
      inspector: new JobInspector(queues),
      registry: deps.registry,
      tokens: config.api.tokens,
      ...(config.api.hostCheck ? { hostCheck: true } : {}),
      ...(config.api.tokenNames ? { tokenNames: config.api.tokenNames } : {}),
      events: deps.events,
      eventSink,
      ...(deps.usage ? { usage: deps.usage } : {}),
      ...(reconcile ? { picks: buildPicks(deps, deps.pools, deps.replacements, (pool) => work.reconcilePool(pool), eventSink) } : {}),
      maxBodyBytes: config.api.maxBodyBytes,
      hosts,
      ping: async (signal) => {
        signal.throwIfAborted();
        await deps.redis.ping();
      },
      storeConnected: () => deps.redis.status === 'ready',
      checkWaitMs: config.checks.timeoutMs + 30_000,
      logger,
    });
    const limits = effectiveLimits(
      { maxConnections: config.api.maxConnections ?? 1024, perPeer: config.api.maxConnectionsPerPeer ?? 256 },
      deps.openFiles,
      API_FILES_SHARE,
    );
    const refusals = connectionRefusals(deps.registry);
    server = await listenHttp(app.fetch, {
      hostname: config.api.host,
      port: config.api.port,
      portFlag: '--port',
      logger,
      name: 'api',
      limits,
      reservedPaths: ['/healthz', '/readyz', ECHO_PATH],
      onRefused: (reason) => refusals.inc({ listener: 'api', reason }),
    });
    logger.info(
      { maxConnections: limits.maxConnections, reserved: limits.reserved, perPeer: limits.perPeer, openFiles: deps.openFiles },
      'api connection caps',
    );
    const address = server.address() as AddressInfo;
    hosts.bind(address.address, address.port);
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    url = `http://${host}:${address.port}`;
  } catch (err) {
    lifecycle.fail(err);
    await lifecycle.close([closeOpened]).catch((closeErr: unknown) => logger.warn({ err: (closeErr as Error).message }, 'closing an API that did not start'));
    throw err;
  }
  logger.info({ url, auth: config.api.tokens.length > 0 }, 'api listening');
  lifecycle.started();
  return {
    url,
    status: lifecycle,
    close: () =>
      lifecycle.close([
        () =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
            if ('closeAllConnections' in server) server.closeAllConnections();
          }),
        () => closeBounded(checkEvents, { logger }),
        () => proxies.close(),
        () => closeAllBounded(queues, { logger }),
      ]),
  };
}

/** The pick and feedback services of one API process: one member cache, the Redis scripts, the counters. */
function buildPicks(
  deps: ApiRoleDeps,
  pools: PoolStore,
  replacements: MemberReplacements,
  reconcilePool: (pool: string) => Promise<void>,
  events: EventSink,
): { picker: PoolPicker; feedback: FeedbackRecorder; rateLimit: FeedbackRateLimit } {
  const settings = deps.config.picks ?? DEFAULT_PICK_SETTINGS;
  const keys = new PickKeys(deps.config.redis.prefix);
  const metrics = createFeedbackMetrics(deps.registry);
  const members = new PoolMemberCache(pools, deps.proxies, settings.memberCacheMs);
  return {
    picker: new PoolPicker({ redis: deps.redis, keys, members, sessionTtlMs: settings.sessionTtlMs, counter: metrics, wake: reconcilePool }),
    feedback: new FeedbackRecorder({
      redis: deps.redis,
      keys,
      proxies: deps.proxies,
      pools,
      replacements,
      requestPoolReconcile: reconcilePool,
      settings,
      counter: metrics,
      notices: {
        blocked: (proxy, pool, outcome, domain, by, until) => events.record(memberBlocked(proxy, pool, outcome, domain, by, until)),
        replacementRequested: (proxy, pool, reason, by) => events.record(replacementRequested(proxy, pool, reason, by)),
      },
    }),
    rateLimit: new FeedbackRateLimit(deps.redis, keys, settings.feedbackRate, settings.feedbackBurst),
  };
}

/** The echo URL's `host:port`: readiness probes send that Host through each proxy (only when set by --echo-url). */
function echoHost(echoUrl: string | undefined): string[] {
  if (echoUrl === undefined) return [];
  const u = new URL(echoUrl);
  return [u.port ? u.host : `${u.host}:${u.protocol === 'https:' ? 443 : 80}`];
}
