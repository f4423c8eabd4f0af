import type { WorkRequests } from '../src/work/work-requests.ts';
import { createRedisClient, redisOptions, type RedisTarget } from '../queues/connection.ts';
import type { RedisClient } from '../src/redis/connections.ts';
import type { AppConfig } from '../src/config/app.ts';
import type { Logger } from '../src/logging.ts';
import type { ReconcileMetrics } from '../src/metrics/proxy-metrics.ts';
import type { InstanceExit, ProxyLifecycle } from '../src/providers/lifecycle.ts';
import { fleetOf } from '../src/proxies/instance-name.ts';
import type { ReadinessHooks, ReadinessProbe } from '../src/proxies/readiness-contract.ts';
import { reconcileAfterEviction } from './pool-processor.ts';
import { recordFailure, type FailureDeps } from '../src/readiness/evict.ts';
import { ProbeLoop } from '../src/readiness/probe-loop.ts';
import { RedisProbeClaims } from '../src/readiness/redis-probe-claims.ts';
import type { ProxyCredentialsReader, ProxyReader, ProxyStatusWriter } from '../src/store/proxy-store.ts';
import type { EventSink } from '../src/events/event-sink.ts';
import type { Secrets } from '../src/secrets/secret-registry.ts';
import { boundedStep, runShutdownSteps, ShutdownError } from '../src/roles/role-lifecycle.ts';

export interface ReadinessWatchDeps {
  config: AppConfig;
  redisTarget: RedisTarget | string;
  proxies: ProxyReader & ProxyCredentialsReader & ProxyStatusWriter;
  logger: Logger;
  /** Where proxies leaving discovery are recorded. */
  events?: EventSink;
  /** Counts looks abandoned for want of own resources (proxy_operator_observer_errors_total). */
  observerErrors?: (where: string, code: string) => void;
  /** The process's secret registry: failures written to a status pass its redaction. */
  secrets?: Secrets;
}

/**
 * Readiness apart from reconcile, in workers of the reconcile queue: the probe loop (every
 * `--probe-interval`) and the providers' exit watch (a local proxy process that exits is out of
 * discovery at once and gets a reconcile, which starts it again, without waiting for a probe).
 */
export function startReadiness(
  deps: ReadinessWatchDeps,
  work: Pick<WorkRequests, 'reconcileProxy' | 'reconcilePool'>,
  lifecycles: ReadonlyMap<string, ProxyLifecycle>,
  probe: ReadinessProbe,
  metrics: ReconcileMetrics,
): { probeLoop: ProbeLoop | undefined; close(): Promise<void> } {
  const { config, logger } = deps;
  const fleet = fleetOf(config.redis.prefix);
  const hooks: ReadinessHooks = {
    onProbe: (provider, ok, seconds) => metrics.probe(provider, ok, seconds),
    onEvicted: (provider, cause, readySeconds) => metrics.evicted(provider, cause, readySeconds),
    ...(deps.observerErrors ? { onObserverError: deps.observerErrors } : {}),
    ...(deps.events ? { events: deps.events } : {}),
    ...(deps.secrets ? { secrets: deps.secrets } : {}),
  };
  // Only evictions (a failed probe, an exited process) ask for these; a pool member's pool looks again too.
  const reconcileNow = reconcileAfterEviction(work, deps.proxies);
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

  let redis: RedisClient | undefined;
  let probeLoop: ProbeLoop | undefined;
  if (config.readiness.intervalMs > 0) {
    redis = createRedisClient(redisOptions(deps.redisTarget, 'worker'));
    redis.on('error', (err: Error) => logger.warn({ err: err.message }, 'probe loop redis connection error'));
    probeLoop = new ProbeLoop({
      proxies: deps.proxies,
      claims: new RedisProbeClaims(redis, config.redis.prefix),
      intervalMs: config.readiness.intervalMs,
      rules: config.readiness,
      probe,
      requestReconcile: reconcileNow,
      hooks,
      logger: logger.child({ component: 'probe-loop' }),
    });
    // Each failed pass or probe record is logged by the loop itself and tried again at the next
    // interval: not the end of the loop, nor of the role.
    probeLoop.on('error', () => undefined);
    probeLoop.start();
  }
  return {
    probeLoop,
    async close() {
      // Every step runs, and what failed is reported, not dropped.
      const errors = await runShutdownSteps([
        () => {
          for (const off of unsubscribe) off();
        },
        // Probes in flight get the grace period: their store writes may wait on Redis for good.
        boundedStep('the probe loop', config.shutdownGraceMs, () => probeLoop?.close()),
        () => redis?.disconnect(),
      ]);
      if (errors.length > 0) throw new ShutdownError('the shutdown of the readiness watch', errors);
    },
  };
}
