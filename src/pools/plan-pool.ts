import type { MemberCause } from '../events/pool-events.ts';
import type { Pool } from '../model/pool-resource.ts';
import type { Proxy, ProxySpec } from '../model/proxy-resource.ts';
import { parseDuration } from '../schema/duration.ts';
import type { ReplacementRequest } from './member-replacements.ts';
import { newMemberName } from './member-name.ts';
import type { PoolStatusReport } from './pool-status.ts';
import { desiredReplicas, failedSince, invalidSpec, isFailed, isReady, memberLabels, removalOrder, sameLabels } from './pool-members.ts';
import { placeKey, placeTargets, type PlaceTarget } from './spread.ts';

/*
 * One pass of the pool reconcile, decided (pure: no I/O, no promises). reconcile-pool.ts reads the
 * pool and its members, asks planPool what to do, and does it in the order the plan lists.
 */

/** While members are on their way, the pool is looked at again after this long even if no trigger arrives. */
export const SAFETY_LOOK_MS = 30_000;

export interface PoolPlanInput {
  pool: Pool;
  /** The pool's members (the Proxies with its label), those being deleted included. */
  members: readonly Proxy[];
  /** Pending replacement requests, by member name. */
  requests: ReadonlyMap<string, ReplacementRequest>;
  now: Date;
  /** A member Failed this long is deleted and replaced. */
  failedReplaceAfterMs: number;
  /** Every Proxy name in use, so new members get others (default: the members'). */
  taken?: ReadonlySet<string>;
  /** Member name suffixes (random by default). */
  suffix?: () => string;
  /** How many members the pool wants (the autoscaler's count this pass; default: desiredReplicas). */
  replicas?: number;
  /**
   * The budget is spent: at most this many live members (those there are), so replacements happen
   * only where they do not grow the pool. Nothing is deleted for it.
   */
  growthCap?: number;
}

/** A member to delete: `cause` for the event's words, `why` more about it (a request's reason, a member's error). */
export interface MemberDeletion {
  member: Proxy;
  cause: MemberCause;
  why?: string;
}

/** A member to create: its name, where it goes (a place from spread.ts), and why. */
export interface MemberCreation {
  name: string;
  spec: ProxySpec;
  labels: Record<string, string>;
  cause: MemberCause;
  why?: string;
}

/** A member whose labels no longer match the template's: updated in place, its instance stays. */
export interface MemberRelabel {
  member: Proxy;
  labels: Record<string, string>;
}

/** The pass, decided. Every kind lists `clear`: the replacement requests done with (their member is gone). */
export type PoolPlan =
  /** Being deleted and no member left: forget the pool. */
  | { kind: 'remove'; clear: string[] }
  /** Being deleted: delete its live members, report, and wait for them to go. */
  | { kind: 'deleting'; clear: string[]; deletes: MemberDeletion[]; remaining: number; status: PoolStatusReport }
  /** A spec the API would refuse: no member is made, the status says why. */
  | { kind: 'invalid'; clear: string[]; message: string; status: PoolStatusReport }
  /** Deletes first (in order), then creates (in order), then relabels, then the status. */
  | {
      kind: 'reconcile';
      clear: string[];
      deletes: MemberDeletion[];
      creates: MemberCreation[];
      relabels: MemberRelabel[];
      status: PoolStatusReport;
      /** When to look again without another trigger (the next maxAge, a Failed member due, the safety net). */
      lookAfterMs?: number;
    };

/** True when the plan changes members or requests (not just the pool's status). */
export function plansChanges(plan: PoolPlan): boolean {
  if (plan.kind === 'remove' || plan.clear.length > 0) return true;
  if (plan.kind === 'deleting') return plan.deletes.length > 0;
  if (plan.kind === 'invalid') return false;
  return plan.deletes.length + plan.creates.length + plan.relabels.length > 0;
}

/**
 * Moves the pool one step toward its spec (see reconcile-pool.ts for the rules). Terminating members
 * (being deleted) count only toward what a pool being deleted waits for: they are out of discovery.
 */
export function planPool(input: PoolPlanInput): PoolPlan {
  const { pool, members, requests } = input;
  const present = new Set(members.map((m) => m.name));
  const clear = [...requests.keys()].filter((m) => !present.has(m));
  const live = members.filter((p) => !p.metadata.deletionRequestedAt);
  if (pool.metadata.deletionRequestedAt) {
    if (members.length === 0) return { kind: 'remove', clear };
    const deletes = live.map((member): MemberDeletion => ({ member, cause: 'pool-deleted' }));
    return { kind: 'deleting', clear, deletes, remaining: members.length, status: { counts: { current: 0, ready: 0, rotating: 0, failed: 0 } } };
  }
  const message = invalidSpec(pool);
  if (message !== undefined) return { kind: 'invalid', clear, message, status: { invalid: message } };
  return { kind: 'reconcile', clear, ...planMembers(input, live) };
}

type MembersPlan = Omit<Extract<PoolPlan, { kind: 'reconcile' }>, 'kind' | 'clear'>;

/** The members a valid pool keeps, replaces, removes and makes. */
function planMembers(input: PoolPlanInput, live: readonly Proxy[]): MembersPlan {
  const { pool } = input;
  const spec = pool.spec;
  const replicas = input.replicas ?? desiredReplicas(pool);
  const targets = placeTargets(spec, replicas);
  const { stale, fresh, lookAfterMs } = sortMembers(input, live, targets);

  // Scale down: surplus members of a place go at once, least healthy first, then the oldest.
  const deletes: MemberDeletion[] = [];
  for (const t of targets) {
    const here = (fresh.get(placeKey(t.place)) ?? []).sort(removalOrder);
    while (here.length > t.count) deletes.push({ member: here.shift() as Proxy, cause: 'scale' });
    fresh.set(placeKey(t.place), here);
  }
  const scaledDown = new Set(deletes.map((d) => d.member.name));

  // Members to replace that are not Ready go first: they serve nothing, and free a surge place. A
  // Ready one leaves only while `replicas` Ready members remain without it: its replacement (made
  // by an earlier pass, within the surge) is Ready before it leaves discovery.
  let ready = live.filter((m) => !scaledDown.has(m.name) && isReady(m)).length;
  const replacing = [...stale].sort((a, b) => removalOrder(a.member, b.member));
  const waiting: MemberDeletion[] = [];
  for (const s of replacing) {
    if (isReady(s.member)) {
      if (ready - 1 < replicas) {
        waiting.push(s);
        continue;
      }
      ready--;
    }
    deletes.push(s);
  }

  // Create what each place lacks, within replicas + maxSurge members in all (and, with the budget
  // spent, within the members there were). New members take the
  // causes of those being replaced first (for the events' words), then scale.
  const creates: MemberCreation[] = [];
  let count = live.length - deletes.length;
  const most = Math.min(replicas + spec.maxSurge, input.growthCap ?? Number.POSITIVE_INFINITY);
  const taken = new Set(input.taken ?? input.members.map((m) => m.name));
  const labelsAt = new Map(targets.map((t) => [placeKey(t.place), memberLabels(pool, t.labels)]));
  const deficits = targets
    .map((t) => ({ place: t.place, labels: labelsAt.get(placeKey(t.place)) ?? {}, missing: t.count - (fresh.get(placeKey(t.place))?.length ?? 0) }))
    .filter((d) => d.missing > 0)
    .sort((a, b) => b.missing - a.missing);
  const causes = replacing.map((s) => ({ cause: s.cause, why: s.why }));
  for (const d of deficits) {
    for (let i = 0; i < d.missing && count < most; i++) {
      const name = newMemberName(pool.name, taken, input.suffix);
      taken.add(name);
      const { cause, why } = causes.shift() ?? { cause: 'scale' as const, why: undefined };
      const place = { provider: d.place.provider, ...(d.place.placement === undefined ? {} : { placement: d.place.placement }) };
      creates.push({ name, spec: place, labels: d.labels, cause, ...(why === undefined ? {} : { why }) });
      count++;
    }
  }

  // Labels follow the template and the member's spread entry without touching instances (a member
  // in a place no longer wanted, on its way out, gets the template's).
  const deleted = new Set(deletes.map((d) => d.member.name));
  const remaining = live.filter((m) => !deleted.has(m.name));
  const relabels = remaining
    .map((member) => ({ member, labels: labelsAt.get(placeKey(member.spec)) ?? memberLabels(pool) }))
    .filter((r) => !sameLabels(r.member.labels, r.labels));

  const rotatingOld = waiting.length;
  const surge = Math.max(0, remaining.length + creates.length - replicas);
  const replaced = new Set(stale.map((s) => s.member.name));
  const freshNotReady = remaining.filter((m) => !isReady(m) && !replaced.has(m.name)).length + creates.length;
  const counts = {
    current: remaining.length + creates.length,
    ready: remaining.filter(isReady).length,
    rotating: rotatingOld + (rotatingOld > 0 ? Math.min(surge, freshNotReady) : 0),
    failed: remaining.filter(isFailed).length,
  };
  // Waiting on new members: their readiness triggers the next look; this one is the safety net.
  const look = rotatingOld > 0 || counts.current !== counts.ready ? lookAt(lookAfterMs, SAFETY_LOOK_MS) : lookAfterMs;
  return { deletes, creates, relabels, status: { counts, desired: replicas }, ...(look === undefined ? {} : { lookAfterMs: look }) };
}

/**
 * Each live member either stays where it is (`fresh`, by place) or is to be replaced (`stale`):
 * in a place the spec no longer wants, asked to be replaced, older than maxAge, or Failed for
 * `failedReplaceAfterMs`, the first that applies. `lookAfterMs`: when the first member that stays
 * turns stale.
 */
function sortMembers(
  input: PoolPlanInput,
  live: readonly Proxy[],
  targets: readonly PlaceTarget[],
): { stale: MemberDeletion[]; fresh: Map<string, Proxy[]>; lookAfterMs: number | undefined } {
  const { now, requests, failedReplaceAfterMs } = input;
  const spec = input.pool.spec;
  const wanted = new Set(targets.map((t) => placeKey(t.place)));
  const maxAgeMs = spec.maxAge === undefined ? undefined : parseDuration(spec.maxAge);
  const stale: MemberDeletion[] = [];
  const fresh = new Map<string, Proxy[]>();
  let lookAfterMs: number | undefined;
  for (const member of live) {
    const request = requests.get(member.name);
    const key = placeKey(member.spec);
    const ageMs = now.getTime() - Date.parse(member.metadata.createdAt);
    const failedMs = isFailed(member) ? now.getTime() - failedSince(member) : undefined;
    if (!wanted.has(key)) stale.push({ member, cause: 'spread' });
    else if (request) stale.push({ member, cause: 'replacement', why: request.reason });
    else if (maxAgeMs !== undefined && ageMs >= maxAgeMs) stale.push({ member, cause: 'rotation' });
    else if (failedMs !== undefined && failedMs >= failedReplaceAfterMs) stale.push(failedDeletion(member));
    else {
      fresh.set(key, [...(fresh.get(key) ?? []), member]);
      if (maxAgeMs !== undefined) lookAfterMs = lookAt(lookAfterMs, maxAgeMs - ageMs);
      if (failedMs !== undefined) lookAfterMs = lookAt(lookAfterMs, failedReplaceAfterMs - failedMs);
    }
  }
  return { stale, fresh, lookAfterMs };
}

function failedDeletion(member: Proxy): MemberDeletion {
  const why = member.status.lastError;
  return { member, cause: 'failed', ...(why === undefined ? {} : { why }) };
}

/** The earlier of a look already planned and one in `ms` (never in the past). */
function lookAt(planned: number | undefined, ms: number): number {
  return Math.max(0, Math.min(planned ?? Number.POSITIVE_INFINITY, ms));
}
