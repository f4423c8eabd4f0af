import { truncateMessage } from './message.ts';
import type { ProviderHealth, TargetStatus } from './provider-health.ts';
import type { CheckResultData } from './check-result.ts';

function laterOf(a: string, b: string): string {
  return Date.parse(a) >= Date.parse(b) ? a : b;
}

/**
 * The publisher's pure function: (stored status, result, now) → new status.
 *
 * - A target's `lastTransitionTime` changes only when its `ready` flips; the object's only
 *   when the overall `ready` flips.
 * - Times come from the result (when the check ran), clamped to `now` so a worker whose clock
 *   runs ahead cannot write times in the future. Redelivering the same result therefore yields
 *   the same object, and a result older than what is stored for a target leaves that target alone.
 * - Targets the result does not mention are kept (a provider's target list can only change with
 *   its configuration, and then the scheduler deletes the object).
 */
export function nextProviderHealth(stored: ProviderHealth | undefined, result: CheckResultData, now: Date): ProviderHealth {
  const checkedAt = new Date(Math.min(Date.parse(result.checkedAt), now.getTime())).toISOString();
  const previous = new Map((stored?.status.targets ?? []).map((t) => [t.name, t]));
  const targets: TargetStatus[] = [];
  const seen = new Set<string>();
  for (const r of result.targets) {
    if (seen.has(r.target)) continue;
    seen.add(r.target);
    const old = previous.get(r.target);
    if (old && Date.parse(old.lastCheckTime) > Date.parse(checkedAt)) {
      targets.push(old);
      continue;
    }
    targets.push({
      name: r.target,
      ready: r.ready,
      reason: r.reason,
      message: truncateMessage(r.message),
      lastTransitionTime: old && old.ready === r.ready ? old.lastTransitionTime : checkedAt,
      lastCheckTime: checkedAt,
      durationSeconds: r.durationSeconds,
      details: { ...r.details },
    });
  }
  for (const [name, old] of previous) if (!seen.has(name)) targets.push(old);
  targets.sort((a, b) => a.name.localeCompare(b.name));

  const ready = targets.length > 0 && targets.every((t) => t.ready);
  const lastCheckTime = stored ? laterOf(stored.status.lastCheckTime, checkedAt) : checkedAt;
  const lastTransitionTime = stored && stored.status.ready === ready ? stored.status.lastTransitionTime : checkedAt;
  return { name: result.provider, status: { ready, lastTransitionTime, lastCheckTime, targets } };
}
