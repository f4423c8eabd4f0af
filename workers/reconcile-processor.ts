import { QUEUES } from '../queues/names.ts';
import { LookAgainLater } from '../queues/retry.ts';
import type { Logger } from '../src/logging.ts';
import type { ReconcileMetrics } from '../src/metrics/proxy-metrics.ts';
import { reconcileProxy, type ReconcileDeps } from '../src/proxies/reconcile.ts';
import type { ReconcileOutcome } from '../src/proxies/reconcile-decisions.ts';
import { poolOf } from '../src/pools/reconcile-pool.ts';
import type { PoolReader } from '../src/store/pool-store.ts';
import type { ProxyReader, ProxySpecWriter } from '../src/store/proxy-store.ts';
import type { Provider } from '../src/providers/types.ts';
import { syncDeclaredProxies } from '../src/proxies/declared-proxies.ts';
import { memberChanged } from '../src/pools/member-changed.ts';
import { JOBS } from '../src/work/jobs.ts';
import { handleWork, type WorkJobHandler } from './consumer.ts';

export interface ReconcileProcessorDeps extends ReconcileDeps {
  logger: Logger;
  metrics?: ReconcileMetrics;
  /** How soon a proxy whose instance is still starting or being deleted is looked at again. */
  recheckMs: number;
  /** ProxyPools: the resync asks for a reconcile of each too, and a member's readiness change asks for its pool's. */
  pools?: PoolReader;
  /**
   * Providers that declare proxies themselves (an `upstream` provider's endpoints): each resync first
   * makes the store hold exactly those (src/proxies/declared-proxies.ts), through `writer`.
   */
  declaring?: { providers: ReadonlyMap<string, Provider>; writer: ProxyReader & ProxySpecWriter };
}

/**
 * Handles the `reconcile` queue: `reconcile` jobs (one proxy, under the job's deadline) and the
 * periodic `resync`. "Look again later" is not a failure: the same job goes back to delayed (so
 * its deduplication id keeps coalescing changes meanwhile). Errors that are not a verdict (a
 * provider API down) are retried with backoff; those that say a retry cannot help (a 403) fail
 * the job at once.
 */
export function reconcileHandlers(deps: ReconcileProcessorDeps): WorkJobHandler[] {
  const withHooks: ReconcileDeps = {
    ...deps,
    onProbe: (provider, ok, seconds) => deps.metrics?.probe(provider, ok, seconds),
    onEvicted: (provider, cause, readySeconds) => deps.metrics?.evicted(provider, cause, readySeconds),
    onReplace: (provider) => deps.metrics?.replaced(provider),
  };
  const resync = handleWork(JOBS.resync, async (_data, ctx): Promise<{ resynced: number; pools: number }> => {
    for (const provider of deps.declaring?.providers.values() ?? []) {
      if (!provider.declaredProxies || !deps.declaring) continue;
      try {
        const declared = await provider.declaredProxies(ctx.signal);
        await syncDeclaredProxies(
          provider.name,
          declared,
          { proxies: deps.declaring.writer, requestReconcile: (p) => ctx.work.reconcileProxy(p), logger: deps.logger },
          ctx.signal,
        );
      } catch (err) {
        // A list that cannot be read creates and deletes nothing; the next resync tries again.
        deps.logger.warn({ provider: provider.name, err: (err as Error).message }, 'could not sync the proxies the provider declares');
      }
    }
    // Every proxy gets a reconcile (deduplicated per proxy), which re-probes Ready ones; every pool one too.
    const proxies = await deps.proxies.list(ctx.signal);
    for (const p of proxies) await ctx.work.reconcileProxy(p.name);
    const pools = deps.pools ? await deps.pools.list(ctx.signal) : [];
    for (const p of pools) await ctx.work.reconcilePool(p.name);
    return { resynced: proxies.length, pools: pools.length };
  });
  const reconcile = handleWork(JOBS.reconcile, async (data, ctx): Promise<ReconcileOutcome> => {
    const log = deps.logger.child({ jobId: ctx.job.id, queue: QUEUES.reconcile, proxy: data.proxy });
    // Read before: once the proxy is deleted its record, and with it the provider, is gone.
    const before = await deps.proxies.get(data.proxy, ctx.signal);
    const provider = before?.spec.provider;
    const outcome = await ctx.deadline((limit) => reconcileProxy(data.proxy, withHooks, limit));
    // A pool member that became Ready, left Ready, Failed or is gone: its pool looks again now.
    const pool = before ? poolOf(before) : undefined;
    if (deps.pools && pool !== undefined && memberChanged(before, outcome)) await ctx.work.reconcilePool(pool);
    deps.metrics?.outcome(provider ?? 'unknown', outcome.kind);
    log.info(
      { outcome: outcome.kind, ...('why' in outcome ? { why: outcome.why } : {}), ...('message' in outcome ? { message: outcome.message } : {}) },
      'reconciled proxy',
    );
    if (outcome.kind === 'retry-later') throw new LookAgainLater(deps.recheckMs, outcome.why);
    return outcome;
  });
  return [reconcile, resync];
}
