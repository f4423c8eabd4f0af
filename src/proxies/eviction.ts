import type { ProxyStatus } from '../model/proxy-resource.ts';
import type { ReadinessRules } from './readiness-contract.ts';

/** Seconds a Ready proxy has been Ready at `now`, from its Ready condition; undefined when unknown. */
export function readySeconds(status: ProxyStatus, now: Date): number | undefined {
  const since = status.conditions.find((c) => c.type === 'Ready' && c.status === 'True')?.lastTransitionTime;
  if (status.phase !== 'Ready' || since === undefined) return undefined;
  return Math.max(0, (now.getTime() - Date.parse(since)) / 1000);
}

/**
 * The status of a Ready proxy after one failed probe (or an exit its provider saw, which evicts at
 * once): still Ready with the failure counted while fewer than `failureThreshold` probes in a row
 * failed, else out of discovery (`Provisioning`, `unreadySince` now). Pure.
 */
export function afterFailure(
  status: ProxyStatus,
  message: string,
  rules: ReadinessRules,
  now: Date,
  immediate = false,
): { status: ProxyStatus; evicted: boolean } {
  const failures = (status.probeFailures ?? 0) + 1;
  const wasReady = status.phase === 'Ready';
  const stillReady = wasReady && !immediate && failures < rules.failureThreshold;
  const { probeSuccesses: _drop, ...rest } = status;
  return {
    status: {
      ...rest,
      phase: stillReady ? 'Ready' : status.phase === 'Ready' ? 'Provisioning' : status.phase,
      probeFailures: failures,
      ...(stillReady ? {} : { unreadySince: status.unreadySince ?? now.toISOString() }),
      lastError: message,
    },
    evicted: wasReady && !stillReady,
  };
}

/**
 * Whether a passed probe of `instanceId` makes the proxy Ready: at once for a proxy that was
 * Ready or never failed, or for a new instance (a restarted process, a replacement); after
 * `successThreshold` passes in a row for the same instance that had failed.
 */
export function passesNeeded(status: ProxyStatus, instanceId: string, rules: ReadinessRules): number {
  const recovering = status.phase !== 'Ready' && status.unreadySince !== undefined && status.instanceId === instanceId;
  return recovering ? rules.successThreshold : 1;
}
