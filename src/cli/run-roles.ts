import type { PoolUsageReader } from '../usage/usage-types.ts';
import type { ApiRole } from '../api/api-role.ts';
import type { AppConfig } from '../config/app.ts';
import { RedisEventStore } from '../events/redis-event-store.ts';
import type { Logger } from '../logging.ts';
import type { ProviderFactory } from '../providers/create-provider.ts';
import type { Provider } from '../providers/types.ts';
import { EgressError } from '../errors.ts';
import { ProcessEnd } from '../roles/process-end.ts';
import { boundedStep, ShutdownError, type RoleState, type RoleStatus } from '../roles/role-lifecycle.ts';
import { ShutdownPlan } from '../roles/shutdown-plan.ts';
import type { SchedulerRole } from '../scheduler/scheduler-role.ts';
import { SecretRegistry } from '../secrets/secret-registry.ts';
import { createStores } from '../store/create-stores.ts';
import { createUsageStore } from './usage-parts.ts';
import { startTracing, type TracingRuntime } from '../telemetry/tracing.ts';
import type { WorkerRole } from '../../workers/worker-role.ts';
import { connectRolesRedis } from './roles-redis.ts';
import { startRoles, type RoleName, type StartedRoles } from './start-roles.ts';

/**
 * How long each shutdown step that has no bound of its own (a store, a connection, the tracing
 * exporter) may take. The roles bound their closes themselves (their grace period for running
 * jobs, then BullMQ's bounds), the private redis-server its stop, the providers theirs.
 */
const STEP_MS = 5000;

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
   * its cause), or when the process lost its Redis (a RedisLostError: the private redis-server
   * exited, or Redis was unreachable for longer than `--redis-lost-after`). It closes nothing:
   * the caller, seeing it reject, calls `close()`.
   */
  run(): Promise<void>;
  /**
   * Closes roles in reverse start order, then connections, then the private Redis; every step
   * runs, each bounded. Rejects with a ShutdownError listing every step that failed. Idempotent.
   */
  close(): Promise<void>;
}

export interface RunRolesOptions {
  /** Tests inject providers with hanging or failing checks; the product has no fake provider. */
  providerFactory?: ProviderFactory;
  /** Pools' usage for their budgets (the worker's pool reconcile); absent: the fleet's usage store (docs/usage.md). */
  poolUsage?: PoolUsageReader;
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

/**
 * The composition root of a long-running process: builds what the chosen roles need, starts
 * them, and returns one handle that closes everything (each step guarded, so one failure does
 * not leak the rest). Redis lost while the roles start ends the start with that cause.
 */
export async function runRoles(config: AppConfig, roles: readonly RoleName[], logger: Logger, options: RunRolesOptions = {}): Promise<RunningRoles> {
  const secrets = options.secrets ?? new SecretRegistry();
  secrets.set('api-tokens', config.api.tokens);
  const logErrors = (errors: readonly Error[]): void => {
    for (const err of errors) logger.error({ err: err.message, code: (err as { code?: unknown }).code }, 'error while shutting down');
  };
  const plan = new ShutdownPlan(logErrors);
  const end = new ProcessEnd();
  let closing: Promise<void> | undefined;
  let closeRequested: () => void = () => undefined;
  const asked = new Promise<void>((resolve) => {
    closeRequested = resolve;
  });
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      closeRequested();
      end.closing();
      const errors = await plan.close();
      logErrors(errors);
      if (errors.length > 0) throw new ShutdownError('the shutdown', errors);
    })());
  const onState = (role: string, state: RoleState, cause?: Error): void => {
    if (state === 'failed') logger.error({ role, state, err: cause?.message }, 'role failed');
    else logger.info({ role, state }, `role ${state}`);
    options.onRoleState?.(role as RoleName, state, cause);
  };
  // A start that lost its race with the close (Redis lost first) stops at the next step.
  const abandonedIfClosing = (): void => {
    if (plan.closing) throw new EgressError('ERR_START_ABANDONED', 'the start was abandoned: the process is closing', { retryable: false });
  };
  const start = async (): Promise<{ redisUrl: string | undefined; tracing: TracingRuntime; started: StartedRoles }> => {
    // First in, last out: spans of the shutdown itself are still exported.
    const t = await startTracing(config.telemetry, roles, secrets);
    plan.add(boundedStep('the tracing exporter', STEP_MS, () => t.shutdown()));
    if (t.enabled) logger.info({ tracesUrl: config.telemetry?.tracesUrl, protocol: config.telemetry?.protocol, roles }, 'tracing on');
    const redis = await connectRolesRedis(config, logger, secrets, plan, end, options);
    abandonedIfClosing();
    // ProviderHealth and Proxy objects: Redis, or Kubernetes custom resources (`--store`).
    const stores = await createStores(config.store, redis.client, config.redis.prefix, logger, secrets);
    plan.add(boundedStep('the status store', STEP_MS, () => stores.status.close()));
    plan.add(boundedStep('the proxy store', STEP_MS, () => stores.proxies.close()));
    plan.add(boundedStep('the pool store', STEP_MS, () => stores.pools.close()));
    if (config.store?.kind === 'kubernetes') logger.info({ namespace: config.store.namespace }, 'ProviderHealth and Proxy objects live in Kubernetes');
    // One event stream per fleet; each role records under its own name. Closed after the roles (steps run in reverse).
    abandonedIfClosing();
    const events = new RedisEventStore(redis.client, config.redis.prefix, config.events, logger.child({ component: 'events' }), secrets);
    plan.add(boundedStep('the event store', STEP_MS, () => events.close()));
    const usage = createUsageStore(config, redis.client);
    const started = await startRoles(roles, {
      config,
      logger,
      redis,
      stores,
      events,
      usage,
      tracing: t,
      secrets,
      plan,
      onState,
      providerFactory: options.providerFactory,
      // Budgets read the fleet's own usage store unless a test gives its own reader.
      poolUsage: options.poolUsage ?? usage,
      openFiles: options.openFiles,
    });
    return { redisUrl: redis.url, tracing: t, started };
  };
  const starting = start();
  // When Redis is lost first, the start goes on in the background until what it waits for fails;
  // whatever it still makes is closed at once (ShutdownPlan).
  starting.catch(() => undefined);
  try {
    const { redisUrl, tracing, started } = await Promise.race([starting, end.ended]);
    // Roles stop only after close(); a process without roles ends with its close too.
    const running = Promise.all([...started.statuses.values()].map((st) => st.run())).then(() => asked);
    const ended = Promise.race([running, end.ended]);
    ended.catch(() => undefined);
    return {
      redisUrl,
      api: started.api,
      scheduler: started.scheduler,
      worker: started.worker,
      providers: started.providers,
      tracing,
      roles: started.statuses,
      run: () => ended,
      close,
    };
  } catch (err) {
    // The start's own error is what the caller hears; the shutdown's are logged.
    await close().catch(() => undefined);
    throw err;
  }
}
