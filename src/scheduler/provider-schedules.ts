import type { DefaultJobOptions, Queue } from 'bullmq';

export interface ScheduleSync {
  created: string[];
  updated: string[];
  unchanged: string[];
  removed: string[];
}

/** One kind of per-provider job scheduler: the checks, the GC sweeps. */
export interface ProviderSchedule {
  /** Scheduler ids are `<idPrefix><provider>`. */
  idPrefix: string;
  jobName: string;
  data: (provider: string) => Record<string, unknown>;
}

/**
 * Makes a queue's per-provider job schedulers match the configuration: one per provider every
 * `intervalMs` (none when it is 0), upserted only when the definition changed (concurrent or
 * needless upserts are what broke schedulers in BullMQ 5.x), and those of providers no longer
 * configured removed — with the jobs they already produced, which would only fail in workers
 * that no longer know the provider.
 */
export async function syncProviderSchedules(
  queue: Queue,
  kind: ProviderSchedule,
  providers: readonly string[],
  intervalMs: number,
  jobOptions: DefaultJobOptions,
): Promise<ScheduleSync> {
  const sync: ScheduleSync = { created: [], updated: [], unchanged: [], removed: [] };
  const existing = await queue.getJobSchedulers(0, -1);
  const wanted = new Set(intervalMs > 0 ? providers : []);
  for (const s of existing) {
    const provider = s.key.startsWith(kind.idPrefix) ? s.key.slice(kind.idPrefix.length) : undefined;
    if (provider !== undefined && !wanted.has(provider)) {
      await queue.removeJobScheduler(s.key);
      sync.removed.push(provider);
    }
  }
  if (sync.removed.length > 0) {
    const removed = new Set(sync.removed);
    for (const job of await queue.getJobs(['waiting', 'delayed', 'prioritized'])) {
      const provider = (job.data as { provider?: unknown } | undefined)?.provider;
      if (typeof provider === 'string' && removed.has(provider)) await job.remove().catch(() => undefined);
    }
  }
  for (const provider of wanted) {
    const id = `${kind.idPrefix}${provider}`;
    const data = kind.data(provider);
    const current = existing.find((s) => s.key === id);
    if (current && current.every === intervalMs && JSON.stringify(current.template?.data) === JSON.stringify(data)) {
      sync.unchanged.push(provider);
      continue;
    }
    await queue.upsertJobScheduler(id, { every: intervalMs }, { name: kind.jobName, data, opts: jobOptions });
    (current ? sync.updated : sync.created).push(provider);
  }
  return sync;
}
