import { NotFoundError } from '../errors.ts';
import type { EventSink } from '../events/event-sink.ts';
import { memberCreated, memberDeleted, poolDeleted, type MemberCause } from '../events/pool-events.ts';
import { parseDuration } from '../schema/duration.ts';
import { POOL_LABEL, poolDocumentSchema, type Pool, type PoolStatus } from '../model/pool-resource.ts';
import { issueLines } from '../schema/zod-helpers.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { PoolReconcileStore } from '../store/pool-store.ts';
import type { ProxyReader, ProxySpecWriter } from '../store/proxy-store.ts';
import type { MemberReplacements, ReplacementRequest } from './member-replacements.ts';
import { newMemberName } from './member-name.ts';
import { placeKey, placeTargets, type MemberPlace } from './spread.ts';
import { writeInvalid, writeStatus } from './write-pool-status.ts';

export interface PoolReconcileDeps {
  pools: PoolReconcileStore;
  /** Members are Proxies: read, created (`apply`) and deleted (`requestDeletion`) through the proxy store. */
  proxies: ProxyReader & ProxySpecWriter;
  replacements: MemberReplacements;
  /** Asks for a reconcile of a member Proxy (deduplicated per proxy). */
  requestReconcile: (proxy: string) => Promise<void>;
  /** A member Failed this long is deleted and replaced (`--replace-after`). */
  failedReplaceAfterMs: number;
  events?: EventSink;
  now?: () => Date;
  /** Member name suffixes (random by default). */
  suffix?: () => string;
}

/**
 * What a pool reconcile did. `lookAfterMs`: when the pool should be looked at again without any
 * other trigger (the next member reaching maxAge, a Failed member due for replacement).
 */
export type PoolReconcileOutcome =
  | { kind: 'gone' }
  | { kind: 'deleted' }
  | { kind: 'deleting'; remaining: number }
  | { kind: 'invalid'; message: string }
  | { kind: 'reconciled'; status: PoolStatus; created: string[]; deleted: string[]; lookAfterMs?: number };

/** A member the pool no longer wants where or as it is, and why. */
interface Stale {
  member: Proxy;
  cause: MemberCause;
  why?: string;
}

/** The pool a Proxy belongs to, by its label (undefined for a plain Proxy). */
export function poolOf(proxy: Pick<Proxy, 'labels'>): string | undefined {
  return proxy.labels[POOL_LABEL];
}

const isReady = (p: Proxy): boolean => p.status.phase === 'Ready';
const isFailed = (p: Proxy): boolean => p.status.phase === 'Failed';

/** Since when a Failed member has been Failed: its Ready condition's last flip (else its creation). */
function failedSince(p: Proxy): number {
  const ready = p.status.conditions.find((c) => c.type === 'Ready');
  return Date.parse(ready?.lastTransitionTime ?? p.metadata.createdAt);
}

/** Least healthy first (Failed, then not Ready), then the oldest: the order members are removed in. */
export function removalOrder(a: Proxy, b: Proxy): number {
  const rank = (p: Proxy): number => (isFailed(p) ? 0 : isReady(p) ? 2 : 1);
  return rank(a) - rank(b) || a.metadata.createdAt.localeCompare(b.metadata.createdAt) || a.name.localeCompare(b.name);
}

/** The labels a member carries: the template's and the pool label. */
function memberLabels(pool: Pool): Record<string, string> {
  return { ...pool.spec.template.metadata.labels, [POOL_LABEL]: pool.name };
}

function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

/**
 * Level-triggered, idempotent reconcile of one ProxyPool: reads the pool and its members (Proxies
 * labelled `egress-proxies.io/pool=<pool>`) and moves them one step toward the spec.
 *
 * - Each place (provider and placement; from `spec.spread` by largest remainder, else the template)
 *   gets its count of members. Surplus members are deleted at once, least healthy first, then the
 *   oldest.
 * - Members to replace (older than `maxAge`, asked to be replaced, in a place the spec no longer
 *   wants, or Failed for `failedReplaceAfterMs`) are replaced surge-first: new members are created
 *   while the pool holds at most `replicas + maxSurge` members; a Ready member is deleted only while
 *   at least `replicas` Ready members remain, so a replacement must be Ready before the member it
 *   replaces leaves discovery. Members that are not Ready go first: they serve nothing.
 * - Members whose labels differ from the template's are updated in place (their instance stays).
 * - A pool being deleted deletes its members, and is removed once they are gone. The pool is read
 *   again before each member a pass creates: once its deletion is accepted, no member is created.
 * Terminating members (being deleted) are not counted: they are out of discovery already.
 */
export async function reconcilePool(name: string, deps: PoolReconcileDeps, signal: AbortSignal): Promise<PoolReconcileOutcome> {
  const pool = await deps.pools.get(name, signal);
  if (!pool) {
    await deleteStrays(name, deps, signal);
    return { kind: 'gone' };
  }
  const now = (deps.now ?? (() => new Date()))();
  const all = await deps.proxies.list(signal);
  const members = all.filter((p) => poolOf(p) === name);
  const live = members.filter((p) => !p.metadata.deletionRequestedAt);
  const requests = await deps.replacements.list(name, signal);
  // Requests about members that are gone are done with.
  const present = new Set(members.map((m) => m.name));
  const done = [...requests.keys()].filter((m) => !present.has(m));
  if (done.length > 0) await deps.replacements.clear(name, done, signal);

  if (pool.metadata.deletionRequestedAt) {
    for (const m of live) await deleteMember(pool, m, 'pool-deleted', undefined, deps, signal);
    if (members.length === 0) {
      await deps.replacements.clear(name, [...requests.keys()], signal);
      await deps.pools.remove(name, signal);
      deps.events?.record(poolDeleted(pool));
      return { kind: 'deleted' };
    }
    await writeStatus(pool, { current: 0, ready: 0, rotating: 0, failed: 0 }, now, deps.pools, signal);
    return { kind: 'deleting', remaining: members.length };
  }

  const invalid = invalidSpec(pool);
  if (invalid !== undefined) {
    await writeInvalid(pool, invalid, now, deps.pools, signal);
    return { kind: 'invalid', message: invalid };
  }
  const spec = pool.spec;
  const targets = placeTargets(spec);
  const wanted = new Map(targets.map((t) => [placeKey(t.place), t]));
  const maxAgeMs = spec.maxAge === undefined ? undefined : parseDuration(spec.maxAge);
  const stale: Stale[] = [];
  const fresh = new Map<string, Proxy[]>();
  let nextLookMs: number | undefined;
  const lookAt = (ms: number): void => {
    nextLookMs = Math.max(0, Math.min(nextLookMs ?? Number.POSITIVE_INFINITY, ms));
  };
  for (const m of live) {
    const request: ReplacementRequest | undefined = requests.get(m.name);
    const key = placeKey(m.spec);
    const ageMs = now.getTime() - Date.parse(m.metadata.createdAt);
    if (!wanted.has(key)) stale.push({ member: m, cause: 'spread' });
    else if (request) stale.push({ member: m, cause: 'replacement', why: request.reason });
    else if (maxAgeMs !== undefined && ageMs >= maxAgeMs) stale.push({ member: m, cause: 'rotation' });
    else if (isFailed(m) && now.getTime() - failedSince(m) >= deps.failedReplaceAfterMs) stale.push({ member: m, cause: 'failed', why: m.status.lastError });
    else {
      fresh.set(key, [...(fresh.get(key) ?? []), m]);
      if (maxAgeMs !== undefined) lookAt(maxAgeMs - ageMs);
      if (isFailed(m)) lookAt(failedSince(m) + deps.failedReplaceAfterMs - now.getTime());
    }
  }

  const created: string[] = [];
  const deleted: string[] = [];
  // Scale down: surplus members of a place go at once, least healthy first, then the oldest.
  for (const t of targets) {
    const here = (fresh.get(placeKey(t.place)) ?? []).sort(removalOrder);
    while (here.length > t.count) {
      const m = here.shift() as Proxy;
      await deleteMember(pool, m, 'scale', undefined, deps, signal);
      deleted.push(m.name);
    }
    fresh.set(placeKey(t.place), here);
  }

  // Members to replace that are not Ready go first: they serve nothing, and free a surge place. A
  // Ready one leaves only while `replicas` Ready members remain without it: its replacement (made
  // by an earlier pass, within the surge) is Ready before it leaves discovery.
  let ready = live.filter((m) => !deleted.includes(m.name) && isReady(m)).length;
  const replacing = [...stale].sort((a, b) => removalOrder(a.member, b.member));
  for (const s of replacing) {
    if (isReady(s.member)) {
      if (ready - 1 < spec.replicas) continue;
      ready--;
    }
    await deleteMember(pool, s.member, s.cause, s.why, deps, signal);
    deleted.push(s.member.name);
  }
  const waiting = replacing.filter((s) => !deleted.includes(s.member.name));

  // Create what each place lacks, within replicas + maxSurge members in all.
  let count = live.length - deleted.length;
  const taken = new Set(all.map((p) => p.name));
  const deficits = targets
    .map((t) => ({ place: t.place, missing: t.count - (fresh.get(placeKey(t.place))?.length ?? 0) }))
    .filter((d) => d.missing > 0)
    .sort((a, b) => b.missing - a.missing);
  // New members replace those being replaced first (for the events' words), then scale.
  const causes = replacing.map((s) => ({ cause: s.cause, why: s.why }));
  for (const d of deficits) {
    for (let i = 0; i < d.missing && count < spec.replicas + spec.maxSurge; i++) {
      // A pass may create thousands of members: one deleted meanwhile creates no more from the moment
      // its deletion is accepted, and this pass turns to deleting what it had made.
      if (await deletionAccepted(name, deps, signal)) return reconcilePool(name, deps, signal);
      const memberName = newMemberName(name, taken, deps.suffix);
      taken.add(memberName);
      const { cause, why } = causes.shift() ?? { cause: 'scale' as const, why: undefined };
      await createMember(pool, memberName, d.place, cause, why, deps, signal);
      created.push(memberName);
      count++;
    }
  }

  // Labels follow the template without touching instances.
  const labels = memberLabels(pool);
  for (const m of live) {
    if (deleted.includes(m.name) || sameLabels(m.labels, labels)) continue;
    await deps.proxies.apply({ metadata: { name: m.name, labels }, spec: m.spec }, signal);
    await deps.requestReconcile(m.name);
  }

  const remaining = live.filter((m) => !deleted.includes(m.name));
  const rotatingOld = waiting.length;
  const surge = Math.max(0, remaining.length + created.length - spec.replicas);
  const freshNotReady = remaining.filter((m) => !isReady(m) && !stale.some((s) => s.member === m)).length + created.length;
  const counts = {
    current: remaining.length + created.length,
    ready: remaining.filter(isReady).length,
    rotating: rotatingOld + (rotatingOld > 0 ? Math.min(surge, freshNotReady) : 0),
    failed: remaining.filter(isFailed).length,
  };
  const status = await writeStatus(pool, counts, now, deps.pools, signal);
  // Waiting on new members: their readiness triggers the next look; this one is the safety net.
  if (rotatingOld > 0 || counts.current !== counts.ready) lookAt(SAFETY_LOOK_MS);
  return { kind: 'reconciled', status, created, deleted, ...(nextLookMs === undefined ? {} : { lookAfterMs: nextLookMs }) };
}

/** True once the pool is being deleted (or gone): read again before each member a pass creates. */
async function deletionAccepted(name: string, deps: PoolReconcileDeps, signal: AbortSignal): Promise<boolean> {
  const current = await deps.pools.get(name, signal);
  return current === undefined || current.metadata.deletionRequestedAt !== undefined;
}

/**
 * What the API would refuse in a pool written around it (`kubectl apply` with the Kubernetes store,
 * where the CRD cannot express every rule: provider or spread, the reserved label, duplicate spread
 * entries, the 10s floor of maxAge), or that the store read as not even a spec (`specProblems`):
 * such a pool makes no members.
 */
function invalidSpec(pool: Pool): string | undefined {
  // What the store could not read as a spec at all (its fields of the wrong type): `spec` holds only the rest.
  if (pool.specProblems) return `invalid spec, no members made: ${pool.specProblems.join('; ')}`;
  const result = poolDocumentSchema.safeParse({ kind: 'ProxyPool', metadata: { name: pool.name, labels: pool.labels }, spec: pool.spec });
  return result.success ? undefined : `invalid spec, no members made: ${issueLines(result.error).join('; ')}`;
}

/**
 * Members of a pool that no longer exists (a pool deleted with kubectl before its first reconcile
 * put its finalizer on): nothing else would ever delete them. The pool label is the pool's alone.
 */
async function deleteStrays(name: string, deps: PoolReconcileDeps, signal: AbortSignal): Promise<void> {
  const strays = (await deps.proxies.list(signal)).filter((p) => poolOf(p) === name && !p.metadata.deletionRequestedAt);
  for (const m of strays) {
    try {
      await deps.proxies.requestDeletion(m.name, {}, signal);
    } catch (err) {
      if (err instanceof NotFoundError) continue;
      throw err;
    }
    await deps.requestReconcile(m.name);
  }
}

/** While members are on their way, the pool is looked at again after this long even if no trigger arrives. */
export const SAFETY_LOOK_MS = 30_000;

async function createMember(
  pool: Pool,
  name: string,
  place: MemberPlace,
  cause: MemberCause,
  why: string | undefined,
  deps: PoolReconcileDeps,
  signal: AbortSignal,
): Promise<void> {
  const spec = { provider: place.provider, ...(place.placement === undefined ? {} : { placement: place.placement }) };
  await deps.proxies.apply({ metadata: { name, labels: memberLabels(pool) }, spec }, signal);
  await deps.requestReconcile(name);
  deps.events?.record(memberCreated(pool, { name, spec }, cause, why));
}

async function deleteMember(
  pool: Pool,
  member: Proxy,
  cause: MemberCause,
  why: string | undefined,
  deps: PoolReconcileDeps,
  signal: AbortSignal,
): Promise<void> {
  try {
    await deps.proxies.requestDeletion(member.name, {}, signal);
  } catch (err) {
    // Gone meanwhile (deleted by hand, or by a reconcile that finished its deletion): nothing to do.
    if (err instanceof NotFoundError) return;
    throw err;
  }
  await deps.requestReconcile(member.name);
  deps.events?.record(memberDeleted(pool, member, cause, why));
}
