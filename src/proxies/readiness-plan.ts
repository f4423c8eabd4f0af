import type { NewEvent } from '../events/event-sink.ts';
import * as ev from '../events/proxy-events.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { Instance } from '../providers/lifecycle.ts';
import { afterFailure, passesNeeded, readySeconds } from './eviction.ts';
import { locationOf, sameLocation } from './location.ts';
import { evictionCauseOf, type EvictionCause, type ProbeFailureCause, type ReadinessPolicy } from './readiness-contract.ts';
import { finish, withPatch, type Finish, type ReconcileOutcome, type StatusUpdate, type Target } from './reconcile-decisions.ts';

/**
 * The decisions of a reconcile after its readiness probe, from the verdict, the readiness policy
 * and the time: Ready, a pass counted, or a failure counted (with eviction and replacement).
 */

/** How `lastError` starts once an unready proxy's instance was replaced (the next instance's cause reads it). */
export const REPLACED = 'replaced:';

/** A passed readiness probe: Ready, or one more pass counted for a proxy coming back after failures. */
export function afterPass(proxy: Proxy, target: Target, instance: Instance, url: string, egressIp: string, policy: ReadinessPolicy): Finish {
  const { instanceName, here } = target;
  const needed = passesNeeded(proxy.status, instance.id, policy);
  const passes = (proxy.status.probeSuccesses ?? 0) + 1;
  if (passes < needed) {
    // Coming back after failures: the same instance must pass --probe-successes probes in a row.
    return finish({ kind: 'retry-later', why: `readiness probe passed (${passes} of ${needed} in a row needed to return)` }, (p) =>
      withPatch(p, { instanceName, instanceId: instance.id, url, probeSuccesses: passes }),
    );
  }
  const ready: StatusUpdate = (p) => {
    // Moved away while the probe ran: the next reconcile (the move's) writes the status.
    if (!sameLocation(locationOf(p), here) || p.metadata.deletionRequestedAt) return undefined;
    const { lastError: _drop, unreadySince: _since, probeSuccesses: _passes, ...rest } = p.status;
    return { ...rest, phase: 'Ready', instanceName, instanceId: instance.id, url, egressIp, probeFailures: 0, observedGeneration: p.metadata.generation };
  };
  // A move took it out of discovery (Provisioning) on the way, even when it was Ready before.
  const back = proxy.status.phase !== 'Ready' || target.moveFrom !== undefined;
  return finish({ kind: 'ready', url }, ready, back ? [ev.becameReady(proxy, url, egressIp)] : []);
}

/** A failed probe: the eviction hook's arguments and event, the replacement's delete and event, then the status. */
export interface ProbeFailed {
  kind: 'probe-failed';
  eviction: { cause: EvictionCause; readySeconds: number | undefined; event: NewEvent } | undefined;
  replacement: { instanceName: string; placement: string | undefined; event: NewEvent } | undefined;
  status: StatusUpdate;
  outcome: ReconcileOutcome;
}

/**
 * A failed readiness probe. A Ready proxy leaves discovery (Provisioning) once `failureThreshold`
 * probes in a row have failed (the first, by default); once unready for `replaceAfterMs`, its
 * instance is deleted so that the next look makes a fresh one.
 */
export function afterProbeFailure(
  proxy: Proxy,
  target: Target,
  instance: Instance,
  url: string,
  probed: { cause: ProbeFailureCause; message: string },
  policy: ReadinessPolicy,
  now: Date,
): ProbeFailed {
  const message = probed.message;
  const next = afterFailure(proxy.status, message, policy, now);
  const failures = next.status.probeFailures ?? 1;
  const unreadySince = next.status.phase === 'Ready' ? undefined : (next.status.unreadySince ?? now.toISOString());
  const cause = evictionCauseOf(probed.cause);
  const replace = unreadySince !== undefined && now.getTime() - Date.parse(unreadySince) >= policy.replaceAfterMs;
  return {
    kind: 'probe-failed',
    eviction: next.evicted ? { cause, readySeconds: readySeconds(proxy.status, now), event: ev.becameNotReady(proxy, cause, message) } : undefined,
    replacement: replace
      ? {
          instanceName: instance.name,
          placement: proxy.spec.placement,
          event: ev.instanceDeleted(proxy, instance.name, target.here, 'replace', `unready since ${unreadySince}`),
        }
      : undefined,
    status: (p) => {
      const { probeSuccesses: _passes, ...rest } = p.status;
      return {
        ...rest,
        observedGeneration: p.metadata.generation,
        phase: next.status.phase === 'Ready' ? 'Ready' : 'Provisioning',
        instanceName: instance.name,
        instanceId: instance.id,
        url,
        probeFailures: replace ? 0 : failures,
        unreadySince: replace ? undefined : unreadySince,
        lastError: replace ? `${REPLACED} unready since ${unreadySince ?? ''} (${message})` : message,
      };
    },
    outcome: { kind: 'retry-later', why: `readiness probe failed (${failures} in a row): ${message}` },
  };
}
