import type { Pool, PoolStatus } from '../model/pool-resource.ts';
import type { ProxyCondition } from '../model/proxy-resource.ts';
import type { PoolStatusWriter } from '../store/pool-store.ts';

/* How the pool reconcile (reconcile-pool.ts) reports a pool: its counts and Ready condition, or why its spec makes no members. */

/** Writes why a pool written around the API makes no members (its Ready condition False, InvalidSpec). */
export async function writeInvalid(pool: Pool, message: string, now: Date, pools: PoolStatusWriter, signal: AbortSignal): Promise<void> {
  await pools.updateStatus(
    pool.name,
    (current) => {
      const previous = current.status.conditions.find((c) => c.type === 'Ready');
      const condition: ProxyCondition = {
        type: 'Ready',
        status: 'False',
        reason: 'InvalidSpec',
        message,
        lastTransitionTime: previous?.status === 'False' ? previous.lastTransitionTime : now.toISOString(),
      };
      const next: PoolStatus = {
        ...current.status,
        desired: current.spec.replicas,
        lastError: message,
        conditions: [condition, ...current.status.conditions.filter((c) => c.type !== 'Ready')],
        observedGeneration: current.metadata.generation,
      };
      return JSON.stringify(next) === JSON.stringify(current.status) ? undefined : next;
    },
    signal,
  );
}

/** Writes the pool's status (only when it changed); the Ready condition flips only with readiness. */
export async function writeStatus(
  pool: Pool,
  counts: Pick<PoolStatus, 'current' | 'ready' | 'rotating' | 'failed'>,
  now: Date,
  pools: PoolStatusWriter,
  signal: AbortSignal,
): Promise<PoolStatus> {
  let written: PoolStatus | undefined;
  const stored = await pools.updateStatus(
    pool.name,
    (current) => {
      const desired = current.metadata.deletionRequestedAt ? 0 : current.spec.replicas;
      const isReadyNow = !current.metadata.deletionRequestedAt && counts.ready >= desired;
      const previous = current.status.conditions.find((c) => c.type === 'Ready');
      const value: ProxyCondition['status'] = isReadyNow ? 'True' : 'False';
      const reason = current.metadata.deletionRequestedAt
        ? 'Terminating'
        : isReadyNow
          ? 'EnoughReady'
          : counts.rotating > 0
            ? 'Rotating'
            : counts.failed > 0
              ? 'MembersFailed'
              : 'Scaling';
      const message = `${counts.ready} of ${desired} members ready`;
      const condition: ProxyCondition = {
        type: 'Ready',
        status: value,
        reason,
        message,
        lastTransitionTime: previous && previous.status === value ? previous.lastTransitionTime : now.toISOString(),
      };
      const { lastError: _drop, ...rest } = current.status;
      const next: PoolStatus = {
        ...rest,
        desired,
        ...counts,
        conditions: [condition, ...current.status.conditions.filter((c) => c.type !== 'Ready')],
        observedGeneration: current.metadata.generation,
      };
      written = next;
      return JSON.stringify(next) === JSON.stringify(current.status) ? undefined : next;
    },
    signal,
  );
  return written ?? stored?.status ?? pool.status;
}
