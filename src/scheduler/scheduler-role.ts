import { EventEmitter } from 'node:events';
import type { Queue } from 'bullmq';
import type { RedisClient } from '../redis/connections.ts';
import { redisOptions, type RedisTarget } from '../../queues/connection.ts';
import { openQueue } from '../../queues/consume.ts';
import { enqueue, jobOptions, parseJobData, type JobDefinition } from '../../queues/jobs.ts';
import { QUEUES, type QueueName } from '../../queues/names.ts';
import type { AppConfig } from '../config/app.ts';
import type { Logger } from '../logging.ts';
import type { StatusStore } from '../store/status-store.ts';
import type { ProxyChangeFeed } from '../store/proxy-store.ts';
import { BullmqWorkRequests, checkNowDedupId } from '../jobs/bullmq-work-requests.ts';
import type { WorkRequests } from '../work/work-requests.ts';
import { syncProviderSchedules, type ScheduleSync } from './provider-schedules.ts';
import { Lease } from './lease.ts';
import { hostname } from 'node:os';
import { noEvents, type EventSink } from '../events/event-sink.ts';
import type { Telemetry } from 'bullmq';
import { closeAllBounded } from '../../queues/bounded-close.ts';
import { RoleLifecycle, type RoleStateObserver, type RoleStatus } from '../roles/role-lifecycle.ts';
import { JOBS } from '../work/jobs.ts';

const RESYNC_SCHEDULER = 'reconcile-resync';

export interface SchedulerDeps {
  config: AppConfig;
  redisTarget: RedisTarget | string;
  /** A connection for the lease; the caller owns it. */
  redis: RedisClient;
  store: StatusStore;
  logger: Logger;
  /** Where leadership changes are recorded. */
  events?: EventSink;
  /** BullMQ telemetry for the scheduler's producers; undefined when tracing is off. */
  telemetry?: Telemetry | undefined;
  /**
   * With `--store kubernetes`: the watch on Proxy and ProxyPool objects. The leader runs it (one watcher
   * per fleet, so each change is enqueued once) and asks for a reconcile of each proxy and pool it reports.
   */
  proxyChanges?: ProxyChangeFeed | undefined;
  /** Told each state the role enters (src/roles/role-lifecycle.ts). */
  onState?: RoleStateObserver | undefined;
}

export interface LeadershipRound {
  schedules: ScheduleSync;
  gcSchedules: ScheduleSync;
  deletedHealth: string[];
  /** Providers a check was started for at once. */
  checkedNow: string[];
}

export interface SchedulerEvents {
  leading: [LeadershipRound];
  standby: [];
  error: [Error];
}

/**
 * A configuration that drops every provider the fleet had (an empty file, a wrong file) costs
 * every schedule and every ProviderHealth: that must be loud, with the names, not an info line.
 */
function warnIfEveryProviderRemoved(
  logger: Logger,
  configured: readonly string[],
  checks: ScheduleSync,
  gc: ScheduleSync,
  deletedHealth: readonly string[],
): void {
  const wanted = new Set(configured);
  // Schedules removed because checks or GC are turned off (interval 0) belong to providers still configured.
  const removed = [...new Set([...checks.removed, ...gc.removed, ...deletedHealth])].filter((p) => !wanted.has(p)).sort();
  const kept = [...checks.updated, ...checks.unchanged, ...gc.updated, ...gc.unchanged];
  if (removed.length === 0 || kept.length > 0) return;
  logger.warn(
    { removed, configured },
    configured.length === 0
      ? `no providers configured: removed the schedules and ProviderHealth of every provider (${removed.join(', ')})`
      : `none of the providers known before is configured any more: removed the schedules and ProviderHealth of ${removed.join(', ')}`,
  );
}

/**
 * `egress scheduler`: one active at a time through a lease in Redis; the others wait as
 * standby. On taking the lead it syncs the check job schedulers, deletes the ProviderHealth
 * of providers no longer configured, and starts a check round at once.
 */
export class SchedulerRole extends EventEmitter<SchedulerEvents> {
  readonly #deps: SchedulerDeps;
  readonly #checks: Queue;
  readonly #gc: Queue;
  readonly #reconcile: Queue;
  /** The watch's reconciles, on `#reconcile`. */
  readonly #work: WorkRequests;
  readonly #lease: Lease;
  readonly #lifecycle: RoleLifecycle;
  readonly #handBack: () => void;
  /** Ends the proxy watch this scheduler runs while it leads. */
  #watching: AbortController | undefined;
  #watch: Promise<void> | undefined;

  constructor(deps: SchedulerDeps) {
    super();
    this.#deps = deps;
    this.#lifecycle = new RoleLifecycle('scheduler', deps.onState);
    const { config } = deps;
    const open = (name: QueueName): Queue =>
      openQueue(name, {
        connection: redisOptions(deps.redisTarget, 'worker'),
        prefix: config.redis.prefix,
        settings: config,
        logger: deps.logger,
        telemetry: deps.telemetry,
      });
    this.#checks = open(QUEUES.checks);
    this.#gc = open(QUEUES.gc);
    this.#reconcile = open(QUEUES.reconcile);
    this.#work = new BullmqWorkRequests({ reconcile: this.#reconcile });
    this.#lease = new Lease(deps.redis, `${config.redis.prefix}:scheduler:lease`, config.leaseMs, deps.logger);
    const events = deps.events ?? noEvents;
    // Which scheduler: the host and process, and the lease holder id that tells two runs apart.
    const identity = `${hostname()}/${process.pid}/${this.#lease.id.slice(0, 8)}`;
    const leadership = (
      reason: 'LeaderElected' | 'LeaderLost',
      message: string,
      type: 'Normal' | 'Warning' = reason === 'LeaderElected' ? 'Normal' : 'Warning',
    ): void =>
      events.record({
        type,
        reason,
        object: { kind: 'Scheduler', name: identity },
        message,
        details: { leaseId: this.#lease.id },
      });
    this.#handBack = () => leadership('LeaderLost', `scheduler ${identity} handed the lease back: it is shutting down`, 'Normal');
    this.#lease.on('acquired', () => {
      deps.logger.info({ leaseId: this.#lease.id }, 'scheduler is now the leader');
      leadership('LeaderElected', `scheduler ${identity} leads: it took the lease`);
      this.#startWatch();
      this.#lead().then(
        (round) => this.emit('leading', round),
        (err: unknown) => {
          // A leader that cannot sync its schedules holds the lease and does nothing: the role has
          // failed, so that its process ends and another scheduler leads.
          deps.logger.error({ err: (err as Error).message }, 'taking the lead failed');
          this.#lifecycle.fail(new Error(`taking the lead failed: ${(err as Error).message}`, { cause: err }));
          this.emit('error', err as Error);
        },
      );
    });
    this.#lease.on('lost', () => {
      deps.logger.warn('scheduler lost the lease; standing by');
      void this.#stopWatch();
      leadership('LeaderLost', `scheduler ${identity} lost the lease (not renewed in time or Redis unreachable); standing by`);
      this.emit('standby');
    });
  }

  get leader(): boolean {
    return this.#lease.held;
  }

  /** starting → running (leading or standing by) → draining → stopped, or failed (taking the lead failed, its close went wrong). */
  get status(): RoleStatus {
    return this.#lifecycle;
  }

  start(): void {
    this.#deps.logger.info({ leaseId: this.#lease.id }, 'scheduler started; trying for the lease');
    this.#lease.start();
    this.#lifecycle.started();
  }

  async #lead(): Promise<LeadershipRound> {
    const { config, store, logger } = this.#deps;
    const names = config.providers.map((p) => p.name);
    // A scheduler's jobs carry its template: validated here, once, like every job that goes in.
    const template = (def: JobDefinition, data: unknown): Record<string, unknown> => parseJobData(def.schema, def.queue, data) as Record<string, unknown>;
    const schedules = await syncProviderSchedules(
      this.#checks,
      { idPrefix: 'check-', jobName: JOBS.check.name, data: (provider) => template(JOBS.check, { provider, trigger: 'schedule' }) },
      names,
      config.checks.intervalMs,
      jobOptions(JOBS.check, config),
    );
    const gcSchedules = await syncProviderSchedules(
      this.#gc,
      { idPrefix: 'gc-', jobName: JOBS.gc.name, data: (provider) => template(JOBS.gc, { provider }) },
      names,
      config.gcIntervalMs,
      jobOptions(JOBS.gc, config),
    );
    // With the Kubernetes store the objects are made here, so a publisher may write only status. Best
    // effort: a scheduler not allowed to create them leaves that to the publisher, and still leads.
    try {
      await store.ensureProviderHealth?.(names);
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'could not create the ProviderHealth objects; the publisher creates them on its first results');
    }
    const deletedHealth: string[] = [];
    for (const ph of await store.listProviderHealth()) {
      if (!names.includes(ph.name) && (await store.deleteProviderHealth(ph.name))) deletedHealth.push(ph.name);
    }
    // A newly created scheduler produces its first job at once; the others get one now.
    const checkedNow: string[] = [];
    if (config.checks.intervalMs > 0) {
      for (const provider of names) {
        if (schedules.created.includes(provider)) {
          checkedNow.push(provider);
          continue;
        }
        await enqueue(this.#checks, JOBS.check, { provider, trigger: 'startup' }, { deduplication: { id: checkNowDedupId(provider) } });
        checkedNow.push(provider);
      }
    }
    await this.#syncResync();
    warnIfEveryProviderRemoved(logger, names, schedules, gcSchedules, deletedHealth);
    logger.info({ ...schedules, gc: gcSchedules, resyncMs: config.resyncMs, deletedHealth, checkedNow }, 'scheduler synced');
    return { schedules, gcSchedules, deletedHealth, checkedNow };
  }

  /** While leading: a reconcile of each proxy and pool the watch reports (deduplicated per proxy and pool, as the API's). */
  #startWatch(): void {
    const feed = this.#deps.proxyChanges;
    if (!feed || this.#watching) return;
    const controller = new AbortController();
    this.#watching = controller;
    const log = this.#deps.logger.child({ component: 'proxy-watch' });
    this.#watch = feed.run(
      (proxy) => {
        this.#work
          .reconcileProxy(proxy)
          .catch((err: unknown) => log.warn({ proxy, err: (err as Error).message }, 'could not enqueue a reconcile; the resync will'));
      },
      controller.signal,
      (pool) => {
        this.#work
          .reconcilePool(pool)
          .catch((err: unknown) =>
            log.warn({ pool, err: (err as Error).message }, 'could not enqueue a pool reconcile; the next change of the pool or its members will'),
          );
      },
    );
    log.info('watching Proxy and ProxyPool objects');
  }

  #stopWatch(): Promise<void> {
    this.#watching?.abort(new Error('the scheduler stopped leading'));
    this.#watching = undefined;
    const watch = this.#watch ?? Promise.resolve();
    this.#watch = undefined;
    return watch;
  }

  /** One job scheduler on the reconcile queue asks for a reconcile of every proxy each resync interval. */
  async #syncResync(): Promise<void> {
    const every = this.#deps.config.resyncMs;
    const current = await this.#reconcile.getJobScheduler(RESYNC_SCHEDULER);
    if (every === 0) {
      if (current) await this.#reconcile.removeJobScheduler(RESYNC_SCHEDULER);
      return;
    }
    if (current?.every === every) return;
    await this.#reconcile.upsertJobScheduler(
      RESYNC_SCHEDULER,
      { every },
      { name: JOBS.resync.name, data: parseJobData(JOBS.resync.schema, QUEUES.reconcile, {}), opts: jobOptions(JOBS.resync, this.#deps.config) },
    );
  }

  /** Hands the lease back (a standby takes over at once) and closes its queues, bounded; rejects with a ShutdownError naming what did not close. Idempotent. */
  close(): Promise<void> {
    return this.#lifecycle.close([
      () => {
        if (this.#lease.held) this.#handBack();
      },
      () => this.#stopWatch(),
      () => this.#lease.stop(),
      () => closeAllBounded([this.#checks, this.#gc, this.#reconcile], { logger: this.#deps.logger }),
    ]);
  }
}
