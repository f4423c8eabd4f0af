import type { PickableMember, PoolSnapshot } from './pick-members.ts';

/** A pool's Ready members as a pick with `tier` sees them: how many carry the tier, and the names of the others. */
export interface TierView {
  /** Ready members whose `tier` label is the tier. */
  count: number;
  /** The names of the other Ready members, one a line: the pick script skips them as it skips blocked ones. */
  others: string;
}

/** Per snapshot (a snapshot is replaced, never changed, when members change): its views by tier, built once. */
const views = new WeakMap<PoolSnapshot, Map<string, TierView>>();

/** The snapshot's members as seen by a pick for `tier`. */
export function tierView(snapshot: PoolSnapshot, tier: string): TierView {
  let byTier = views.get(snapshot);
  if (!byTier) {
    byTier = new Map();
    views.set(snapshot, byTier);
  }
  let view = byTier.get(tier);
  if (!view) {
    const inTier = (m: PickableMember): boolean => m.tier === tier;
    view = {
      count: snapshot.members.filter(inTier).length,
      others: snapshot.members
        .filter((m) => !inTier(m))
        .map((m) => m.name)
        .join('\n'),
    };
    byTier.set(tier, view);
  }
  return view;
}

/** The tiers the snapshot's Ready members carry, sorted (for the words of a 503). */
export function tiersOf(snapshot: PoolSnapshot): string[] {
  return [...new Set(snapshot.members.flatMap((m) => (m.tier === undefined ? [] : [m.tier])))].sort();
}

/** The tier after `tier` in a pool's escalation order, or undefined (no order, not in it, or the last). */
export function nextTier(order: readonly string[] | undefined, tier: string | undefined): string | undefined {
  if (order === undefined || tier === undefined) return undefined;
  const i = order.indexOf(tier);
  return i < 0 ? undefined : order[i + 1];
}
