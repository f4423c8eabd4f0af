import { Counter, type Registry } from 'prom-client';
import { QUEUES } from '../queues/names.ts';
import type { Logger } from '../src/logging.ts';
import type { ProxyLifecycle } from '../src/providers/lifecycle.ts';
import { sweepProvider, type GcDeps, type SweepResult } from '../src/proxies/gc.ts';
import { GC_DELETE_BUDGET_MS, JOBS } from '../src/work/jobs.ts';
import { handleWork, type WorkJobHandler } from './consumer.ts';

export interface GcProcessorDeps extends Omit<GcDeps, 'onDelete' | 'logger' | 'deletesPerSecond'> {
  lifecycles: ReadonlyMap<string, ProxyLifecycle>;
  /** A provider's delete rate (`gcDeletesPerSecond` of the configuration). */
  deletesPerSecond: (provider: string) => number;
  registry: Registry;
  logger: Logger;
}

/** Handles one `gc` job: a sweep of one provider, under the job's deadline. */
export function gcHandler(deps: GcProcessorDeps): WorkJobHandler {
  const deletions =
    (deps.registry.getSingleMetric('proxy_operator_gc_deletions_total') as Counter | undefined) ??
    new Counter({
      name: 'proxy_operator_gc_deletions_total',
      help: 'Instances the garbage-collection sweep deleted, by provider and reason.',
      labelNames: ['provider', 'reason'],
      registers: [deps.registry],
    });
  return handleWork(JOBS.gc, async (data, ctx): Promise<SweepResult | { provider: string; skipped: string }> => {
    const lifecycle = deps.lifecycles.get(data.provider);
    if (!lifecycle) return { provider: data.provider, skipped: 'the provider hosts no proxies in this worker' };
    const log = deps.logger.child({ jobId: ctx.job.id, queue: QUEUES.gc, provider: data.provider });
    const result = await ctx.deadline((limit) =>
      sweepProvider(
        data.provider,
        lifecycle,
        {
          ...deps,
          deletesPerSecond: deps.deletesPerSecond(data.provider),
          deleteBudgetMs: GC_DELETE_BUDGET_MS,
          logger: log,
          onDelete: (provider, reason) => deletions.inc({ provider, reason }),
        },
        limit,
      ),
    );
    log.info({ seen: result.seen, kept: result.kept, young: result.young, deleted: result.deleted.length, left: result.left }, 'gc sweep done');
    return result;
  });
}
