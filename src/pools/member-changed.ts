import type { Proxy } from '../model/proxy-resource.ts';
import type { ReconcileOutcome } from '../proxies/reconcile-decisions.ts';
import { poolOf } from './pool-members.ts';

/**
 * After a member Proxy's reconcile: asks for its pool's reconcile when the member's readiness
 * changed (it became Ready, left Ready, Failed) or it is gone, so a rotation moves on as soon as a
 * replacement is Ready. A plain Proxy, or a member whose state did not change, asks for nothing.
 */
export function memberChanged(before: Proxy | undefined, outcome: ReconcileOutcome): boolean {
  if (!before || poolOf(before) === undefined) return false;
  if (outcome.kind === 'deleted' || outcome.kind === 'gone') return true;
  const wasReady = before.status.phase === 'Ready';
  if (outcome.kind === 'ready') return !wasReady;
  if (outcome.kind === 'failed') return before.status.phase !== 'Failed';
  return wasReady;
}
