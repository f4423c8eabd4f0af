import type { PoolSpec } from '../model/pool-resource.ts';

/** Where members go: a provider and, when it has a choice, a placement. */
export interface MemberPlace {
  provider: string;
  placement?: string;
}

/** One place, how many members the pool wants there, and the labels its spread entry adds to them. */
export interface PlaceTarget {
  place: MemberPlace;
  count: number;
  /** Labels the spread entry adds to its members (absent when it adds none). */
  labels?: Record<string, string>;
}

/** A stable key of a place (`provider` + NUL + `placement`), to group members by where they are. */
export function placeKey(place: MemberPlace): string {
  return `${place.provider}\0${place.placement ?? ''}`;
}

/**
 * Member counts per place. Without `spread`, every member goes where the template says. With it,
 * `replicas` is split by weight (`spec.replicas`, or the autoscaler's count) with the largest-remainder method: each place gets the floor of its
 * exact share, and the members left over go to the largest remainders (ties: the earlier entry), so
 * every count is within ±1 of its weighted share and the counts add up to `replicas`.
 */
export function placeTargets(spec: PoolSpec, replicas: number = spec.replicas ?? 0): PlaceTarget[] {
  const spread = spec.spread;
  if (spread === undefined || spread.length === 0) {
    const { provider, placement } = spec.template.spec;
    // The schema requires a provider when there is no spread.
    return [{ place: { provider: provider ?? '', ...(placement === undefined ? {} : { placement }) }, count: replicas }];
  }
  const total = spread.reduce((sum, s) => sum + s.weight, 0);
  const shares = spread.map((s, index) => {
    const exact = (replicas * s.weight) / total;
    return { index, floor: Math.floor(exact), remainder: exact - Math.floor(exact) };
  });
  let left = replicas - shares.reduce((sum, s) => sum + s.floor, 0);
  const counts = shares.map((s) => s.floor);
  for (const s of [...shares].sort((a, b) => b.remainder - a.remainder || a.index - b.index)) {
    if (left <= 0) break;
    counts[s.index] = (counts[s.index] ?? 0) + 1;
    left--;
  }
  return spread.map((s, i) => ({
    place: { provider: s.provider, ...(s.placement === undefined ? {} : { placement: s.placement }) },
    count: counts[i] ?? 0,
    ...(s.labels === undefined ? {} : { labels: s.labels }),
  }));
}
