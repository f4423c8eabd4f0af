import type { Queue } from 'bullmq';
import { checkSchedulerId, providerOfCheckScheduler } from '../../queues/names.ts';
import type { CheckJobData } from '../../queues/jobs.ts';
import type { DefaultJobOptions } from 'bullmq';

export interface ScheduleSync {
  created: string[];
  updated: string[];
  unchanged: string[];
  removed: string[];
}

/**
 * Makes the `checks` queue's job schedulers match the configuration: one per provider every
 * `intervalMs` (none when it is 0), upserted only when the definition changed (concurrent or
 * needless upserts are what broke schedulers in BullMQ 5.x), and those of providers no longer
 * configured removed.
 */
export async function syncCheckSchedules(
  checks: Queue,
  providers: readonly string[],
  intervalMs: number,
  jobOptions: DefaultJobOptions,
): Promise<ScheduleSync> {
  const sync: ScheduleSync = { created: [], updated: [], unchanged: [], removed: [] };
  const existing = await checks.getJobSchedulers(0, -1);
  const wanted = new Set(intervalMs > 0 ? providers : []);
  for (const s of existing) {
    const provider = providerOfCheckScheduler(s.key);
    if (provider !== undefined && !wanted.has(provider)) {
      await checks.removeJobScheduler(s.key);
      sync.removed.push(provider);
    }
  }
  if (sync.removed.length > 0) {
    // Checks the removed schedulers already produced would only fail in workers that no
    // longer know the provider.
    const removed = new Set(sync.removed);
    for (const job of await checks.getJobs(['waiting', 'delayed', 'prioritized'])) {
      const provider = (job.data as Partial<CheckJobData> | undefined)?.provider;
      if (provider !== undefined && removed.has(provider)) await job.remove().catch(() => undefined);
    }
  }
  for (const provider of wanted) {
    const id = checkSchedulerId(provider);
    const data: CheckJobData = { provider, trigger: 'schedule' };
    const current = existing.find((s) => s.key === id);
    if (current && current.every === intervalMs && JSON.stringify(current.template?.data) === JSON.stringify(data)) {
      sync.unchanged.push(provider);
      continue;
    }
    await checks.upsertJobScheduler(id, { every: intervalMs }, { name: 'check', data, opts: jobOptions });
    (current ? sync.updated : sync.created).push(provider);
  }
  return sync;
}
