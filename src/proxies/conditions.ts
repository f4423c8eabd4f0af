import { truncateMessage } from '../health/message.ts';
import type { ProxyCondition, ProxyStatus } from '../model/proxy-resource.ts';
import { NO_REDACTION, type Redactor } from '../secrets/secret-registry.ts';

/**
 * Keeps the `Ready` condition in step with the phase: True only in phase Ready; its reason is
 * the phase (or `ProbeFailing` for a Ready proxy whose last probes failed), its message the last
 * error (at most MAX_MESSAGE characters, like `lastError` itself); `lastTransitionTime` moves only when the status flips, like ProviderHealth's.
 */
export function withReadyCondition(written: ProxyStatus, now: Date, secrets: Redactor = NO_REDACTION): ProxyStatus {
  // Every status write passes here: a peer's text (a daemon's or an API server's error) passes the one
  // redaction (peers quote the requests they refuse, credentials and tokens included), then is cut to
  // MAX_MESSAGE where it is stored, in `lastError` and so in the condition's message.
  const status = written.lastError === undefined ? written : { ...written, lastError: truncateMessage(secrets.redact(written.lastError)) };
  const ready = status.phase === 'Ready';
  const previous = status.conditions.find((c) => c.type === 'Ready');
  const value: ProxyCondition['status'] = ready ? 'True' : 'False';
  const reason = ready && (status.probeFailures ?? 0) > 0 ? 'ProbeFailing' : status.phase;
  const condition: ProxyCondition = {
    type: 'Ready',
    status: value,
    reason,
    message: status.lastError ?? '',
    lastTransitionTime: previous && previous.status === value ? previous.lastTransitionTime : now.toISOString(),
  };
  return { ...status, conditions: [condition, ...status.conditions.filter((c) => c.type !== 'Ready')] };
}
