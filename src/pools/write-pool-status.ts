import type { PoolStatus } from '../model/pool-resource.ts';
import type { PoolStatusWriter } from '../store/pool-store.ts';
import { nextPoolStatus, sameStatus, type PoolStatusReport } from './pool-status.ts';

/**
 * Writes what a pool reconcile (reconcile-pool.ts) reports on pool `name`, against the pool as
 * stored at the write (compare-and-set), and only when it changes something. Resolves to the status
 * the pool has afterwards (`fallback` when the pool is gone).
 */
export async function writePoolStatus(
  name: string,
  report: PoolStatusReport,
  now: Date,
  pools: PoolStatusWriter,
  fallback: PoolStatus,
  signal: AbortSignal,
): Promise<PoolStatus> {
  let written: PoolStatus | undefined;
  const stored = await pools.updateStatus(
    name,
    (current) => {
      const next = nextPoolStatus(current, report, now);
      written = next;
      return sameStatus(next, current.status) ? undefined : next;
    },
    signal,
  );
  return written ?? stored?.status ?? fallback;
}
