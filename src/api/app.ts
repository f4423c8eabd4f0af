import type { Queue, QueueEvents } from 'bullmq';
import { Hono } from 'hono';
import type { Registry } from 'prom-client';
import type { JobInspector } from '../jobs/job-inspection.ts';
import { BullmqWorkRequests } from '../jobs/bullmq-work-requests.ts';
import type { WorkRequests } from '../work/work-requests.ts';
import type { Logger } from '../logging.ts';
import type { StatusStore } from '../store/status-store.ts';
import { requireToken, tokenMatcher } from '../http/auth.ts';
import { BULL_BOARD_PATH, mountBullBoard } from './bull-board.ts';
import { CONSOLE_PAGES, CONSOLE_PATH, consoleAuthentication, consoleRoutes } from '../console/routes.ts';
import { ConsoleSessions } from '../console/sessions.ts';
import { errorResponse } from './http-errors.ts';
import { SharedDeadlines } from '../abort.ts';
import { raceSignal, readDeadline } from './read-deadline.ts';
import { writeDeadline } from './write-deadline.ts';
import { STORE_RETRY_AFTER_SECONDS } from './store-unavailable.ts';
import { limitBody, requireAllowedHost, requireMutationMediaType, requireSameOrigin, type HostAllowList } from '../http/request-guards.ts';
import { jobRoutes } from './routes/jobs.ts';
import { echoRoute } from '../readiness/echo.ts';
import { providerHealthRoutes } from './routes/provider-health.ts';
import { proxyRoutes } from './routes/proxies.ts';
import { eventRoutes } from './routes/events.ts';
import { noEvents, type EventReader, type EventSink } from '../events/event-sink.ts';
import type { ProxyApiStore } from '../store/proxy-store.ts';
import type { PoolApiStore } from '../store/pool-store.ts';
import type { MemberReplacements } from '../pools/member-replacements.ts';
import { poolRoutes } from './routes/pools.ts';
import { pickRoutes } from './routes/pick.ts';
import { feedbackRoutes } from './routes/feedback.ts';
import type { PoolPicker } from '../pools/pick-service.ts';
import type { FeedbackRecorder } from '../pools/feedback-service.ts';
import type { FeedbackRateLimit } from '../pools/feedback-rate-limit.ts';
import { usageRoutes } from './routes/usage.ts';
import type { UsageStore } from '../usage/usage-store.ts';

export interface ApiDeps {
  store: StatusStore;
  proxies: ProxyApiStore;
  /** ProxyPools and their members' replacement requests (`rotate`). */
  pools: PoolApiStore;
  replacements: MemberReplacements;
  providers: readonly string[];
  checks: Queue;
  checkEvents: QueueEvents;
  /** Where the routes ask for reconciles and checks; by default BullMQ jobs on `checks` and `queues`' reconcile queue. */
  work?: WorkRequests;
  /** Every queue, for Bull Board and job inspection. */
  queues: readonly Queue[];
  inspector: JobInspector;
  registry: Registry;
  tokens: readonly string[];
  /** The name of each token, by position (events record who applied and deleted); `#N` where absent. */
  tokenNames?: readonly string[];
  /** Where `GET /v1/events` reads. */
  events: EventReader;
  /** Where the API records what its callers did (applies, deletions); none: nothing recorded. */
  eventSink?: EventSink;
  /** Largest request body accepted; larger ones are answered 413. */
  maxBodyBytes: number;
  /** The `Host` names served while there are no tokens (DNS rebinding defence). */
  hosts: HostAllowList;
  /** Check `Host` against `hosts` although there are tokens (the data directory's own token on loopback). */
  hostCheck?: boolean;
  /** Answers whether Redis is reachable, for /readyz. */
  ping: (signal: AbortSignal) => Promise<void>;
  /** True while the Redis connection is up: an unexpected error while it is down is a 503. */
  storeConnected: () => boolean;
  /** Deadline of every GET/HEAD but /healthz and /readyz (default 3 s). */
  readDeadlineMs?: number;
  /**
   * Deadline of every other request (default 10 s): answered 503 ERR_STORE_UNAVAILABLE when Redis
   * does not answer by then; its store writes are fenced a fifth of it earlier (src/api/write-deadline.ts).
   */
  writeDeadlineMs?: number;
  checkWaitMs: number;
  /** Picks from pools and ban feedback (`/v1/pools/{name}/pick`, `…/feedback`); absent: not served. */
  picks?: { picker: PoolPicker; feedback: FeedbackRecorder; rateLimit: FeedbackRateLimit };
  /** Where `GET /v1/usage` reads (docs/usage.md); absent: not served. */
  usage?: Pick<UsageStore, 'query'>;
  logger: Logger;
  /** The console's sessions (src/console); a fresh in-memory set when absent. */
  consoleSessions?: ConsoleSessions;
}

/** The HTTP API as a Hono app (served by @hono/node-server in api-server.ts). */
export function createApiApp(deps: ApiDeps): Hono {
  const app = new Hono();
  const reconcile = deps.queues.find((q) => q.name === 'reconcile');
  const work = deps.work ?? new BullmqWorkRequests({ reconcile, checks: deps.checks, checkEvents: deps.checkEvents });
  app.onError((err, c) => errorResponse(err, c, { logger: deps.logger, storeConnected: deps.storeConnected }));
  app.notFound((c) => c.json({ error: 'ERR_NOT_FOUND', message: `no route for ${c.req.method} ${c.req.path.slice(0, 200)}` }, 404));
  // Order matters: who may talk to us (Host, token, Origin) before what they send (media type, size).
  if (deps.tokens.length === 0 || deps.hostCheck) app.use('*', requireAllowedHost(deps.hosts));
  app.use('*', requireToken(deps.tokens, deps.tokenNames, consoleAuthentication));
  app.use('*', requireSameOrigin());
  app.use('*', requireMutationMediaType());
  app.use('*', limitBody(deps.maxBodyBytes));
  app.use('*', readDeadline(deps.readDeadlineMs ?? 3000, ['/healthz', '/readyz', ...CONSOLE_PAGES]));
  const writeMs = deps.writeDeadlineMs ?? 10_000;
  app.use('*', writeDeadline(writeMs, writeMs / 5, []));

  app.get('/healthz', (c) => c.text('ok'));
  const readinessDeadlines = new SharedDeadlines(2000);
  app.get('/readyz', async (c) => {
    try {
      const signal = readinessDeadlines.signal();
      await raceSignal(deps.ping(signal), signal, () => new Error('no answer within 2s'));
      return c.text('ok');
    } catch (err) {
      c.header('Retry-After', String(STORE_RETRY_AFTER_SECONDS));
      return c.json({ error: 'NotReady', message: `redis is not reachable: ${(err as Error).message}` }, 503);
    }
  });
  app.get('/metrics', async (c) => {
    const body = await deps.registry.metrics();
    return c.body(body, 200, { 'Content-Type': deps.registry.contentType });
  });
  app.route('/v1', providerHealthRoutes({ store: deps.store, providers: deps.providers, work, waitMs: deps.checkWaitMs }));
  app.route('/v1', jobRoutes(deps.inspector));
  app.route('/v1', echoRoute());
  if (reconcile) app.route('/v1', proxyRoutes({ proxies: deps.proxies, providers: deps.providers, work, events: deps.eventSink ?? noEvents }));
  if (reconcile) {
    app.route(
      '/v1',
      poolRoutes({
        pools: deps.pools,
        proxies: deps.proxies,
        replacements: deps.replacements,
        providers: deps.providers,
        work,
        events: deps.eventSink ?? noEvents,
      }),
    );
  }
  app.route('/v1', eventRoutes({ events: deps.events }));
  if (deps.usage) app.route('/v1', usageRoutes({ usage: deps.usage }));
  if (deps.picks) {
    app.route('/v1', pickRoutes(deps.picks));
    app.route('/v1', feedbackRoutes(deps.picks));
  }
  const sessions = deps.consoleSessions ?? new ConsoleSessions();
  app.route(
    CONSOLE_PATH,
    consoleRoutes({
      sessions,
      matchToken: tokenMatcher(deps.tokens, deps.tokenNames),
      hasTokens: deps.tokens.length > 0,
      dispatch: async (request, env) => app.fetch(request, env),
      registry: deps.registry,
      boardPath: BULL_BOARD_PATH,
      sessionTtlMs: sessions.ttlMs,
    }),
  );
  mountBullBoard(app, deps.queues, { storeConnected: deps.storeConnected, logger: deps.logger });
  return app;
}
