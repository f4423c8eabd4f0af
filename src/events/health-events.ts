import type { ProviderHealth } from '../health/provider-health.ts';
import type { NewEvent } from './event-sink.ts';

/**
 * The check reason flips between two states of a ProviderHealth: one event per target whose
 * reason changed (`Ok` → `Timeout`, `Timeout` → `Ok`…), and per target first seen failing.
 * A Warning when the new reason is not `Ok`. The same state twice gives nothing, so a redelivered
 * result records nothing again.
 */
export function reasonChanges(before: ProviderHealth | undefined, after: ProviderHealth): NewEvent[] {
  const previous = new Map((before?.status.targets ?? []).map((t) => [t.name, t]));
  const events: NewEvent[] = [];
  for (const target of after.status.targets) {
    const old = previous.get(target.name);
    if (old ? old.reason === target.reason : target.ready) continue;
    events.push({
      type: target.ready ? 'Normal' : 'Warning',
      reason: 'CheckReasonChanged',
      object: { kind: 'ProviderHealth', name: after.name },
      provider: after.name,
      message: `target ${target.name}: ${old ? `${old.reason} → ` : ''}${target.reason}${target.ready ? '' : `: ${target.message.slice(0, 300)}`}`,
      details: { target: target.name, from: old?.reason ?? '', to: target.reason, ready: target.ready },
    });
  }
  return events;
}
