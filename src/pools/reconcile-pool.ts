import { NotFoundError } from '../errors.ts';
import type { EventSink } from '../events/event-sink.ts';
import { memberCreated, memberDeleted, poolDeleted } from '../events/pool-events.ts';
import type { Pool, PoolStatus } from '../model/pool-resource.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { PoolReconcileStore } from '../store/pool-store.ts';
import type { ProxyReader, ProxySpecWriter } from '../store/proxy-store.ts';
import type { MemberReplacements, ReplacementRequest } from './member-replacements.ts';
import { planPool, plansChanges, type MemberCreation, type MemberDeletion, type PoolPlan } from './plan-pool.ts';
import { invalidSpec, poolOf } from './pool-members.ts';
import { scalePool, type PoolScaling, type PoolScalingDeps } from './pool-scaling.ts';
import { writePoolStatus } from './write-pool-status.ts';

export { poolOf, removalOrder } from './pool-members.ts';
export { SAFETY_LOOK_MS } from './plan-pool.ts';

export interface PoolReconcileDeps extends Omit<PoolScalingDeps, 'events'> {
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

/**
 * Level-triggered, idempotent reconcile of one ProxyPool: reads the pool and its members (Proxies
 * labelled `egress-proxies.io/pool=<pool>`), asks the plan (plan-pool.ts) and carries it out.
 *
 * - Each place (provider and placement; from `spec.spread` by largest remainder, else the template)
 *   gets its count of members. Surplus members are deleted at once, least healthy first, then the
 *   oldest.
 * - Members to replace (older than `maxAge`, asked to be replaced, in a place the spec no longer
 *   wants, or Failed for `failedReplaceAfterMs`) are replaced surge-first: new members are created
 *   while the pool holds at most `replicas + maxSurge` members; a Ready member is deleted only while
 *   at least `replicas` Ready members remain, so a replacement must be Ready before the member it
 *   replaces leaves discovery. Members that are not Ready go first: they serve nothing.
 * - Members whose labels differ from the template's and their spread entry's are updated in place (their instance stays).
 * - A pool being deleted deletes its members, and is removed once they are gone. The pool is read
 *   again before each member a pass creates: once its deletion is accepted, no member is created.
 * Terminating members (being deleted) are not counted: they are out of discovery already.
 *
 * Members are read through `listPoolMembers` where the store has it (Kubernetes: a label selector,
 * served from the API server's cache, which may be a moment behind); a pass whose plan would change
 * members or requests reads them again with `list()`, consistent, and acts on that plan alone.
 */
export async function reconcilePool(name: string, deps: PoolReconcileDeps, signal: AbortSignal): Promise<PoolReconcileOutcome> {
  const pool = await deps.pools.get(name, signal);
  if (!pool) {
    await deleteStrays(name, deps, signal);
    return { kind: 'gone' };
  }
  const now = (deps.now ?? (() => new Date()))();
  let view = await readMembers(name, deps.proxies, 'cached', signal);
  const requests = await deps.replacements.list(name, signal);
  // Budgets and the autoscaler (valid pools not being deleted): the count wanted, the growth allowed.
  const scaling =
    pool.metadata.deletionRequestedAt === undefined && invalidSpec(pool) === undefined
      ? await scalePool(pool, view.members.filter((m) => !m.metadata.deletionRequestedAt).length, now, deps, signal)
      : {};
  let plan = planFor(pool, view, requests, now, deps, scaling);
  if (!view.consistent && plansChanges(plan)) {
    view = await readMembers(name, deps.proxies, 'consistent', signal);
    plan = planFor(pool, view, requests, now, deps, scaling);
  }
  if (plan.clear.length > 0) await deps.replacements.clear(name, plan.clear, signal);
  return carryOut(pool, plan, now, deps, signal);
}

async function carryOut(pool: Pool, plan: PoolPlan, now: Date, deps: PoolReconcileDeps, signal: AbortSignal): Promise<PoolReconcileOutcome> {
  switch (plan.kind) {
    case 'remove':
      await deps.demand?.forget(pool.name, signal);
      await deps.pools.remove(pool.name, signal);
      deps.events?.record(poolDeleted(pool));
      return { kind: 'deleted' };
    case 'deleting':
      for (const d of plan.deletes) await deleteMember(pool, d, deps, signal);
      await writePoolStatus(pool.name, plan.status, now, deps.pools, pool.status, signal);
      return { kind: 'deleting', remaining: plan.remaining };
    case 'invalid':
      await writePoolStatus(pool.name, plan.status, now, deps.pools, pool.status, signal);
      return { kind: 'invalid', message: plan.message };
    case 'reconcile': {
      for (const d of plan.deletes) await deleteMember(pool, d, deps, signal);
      for (const c of plan.creates) {
        // A pass may create thousands of members: one deleted meanwhile creates no more from the moment
        // its deletion is accepted, and this pass turns to deleting what it had made.
        if (await deletionAccepted(pool.name, deps, signal)) return reconcilePool(pool.name, deps, signal);
        await createMember(pool, c, deps, signal);
      }
      for (const r of plan.relabels) {
        await deps.proxies.apply({ metadata: { name: r.member.name, labels: r.labels }, spec: r.member.spec }, signal);
        await deps.requestReconcile(r.member.name);
      }
      const status = await writePoolStatus(pool.name, plan.status, now, deps.pools, pool.status, signal);
      const created = plan.creates.map((c) => c.name);
      const deleted = plan.deletes.map((d) => d.member.name);
      return { kind: 'reconciled', status, created, deleted, ...(plan.lookAfterMs === undefined ? {} : { lookAfterMs: plan.lookAfterMs }) };
    }
  }
}

function planFor(
  pool: Pool,
  view: MemberView,
  requests: ReadonlyMap<string, ReplacementRequest>,
  now: Date,
  deps: PoolReconcileDeps,
  scaling: PoolScaling,
): PoolPlan {
  const { members, taken } = view;
  // A plan from a cached read is carried out only when it creates nothing: its names are never used,
  // and drawing them from a counter leaves `deps.suffix` to the plan that is.
  const suffix = !view.consistent ? { suffix: placeholders() } : deps.suffix === undefined ? {} : { suffix: deps.suffix };
  const { replicas, growthCap } = scaling;
  const plan = planPool({
    pool,
    members,
    taken,
    requests,
    now,
    failedReplaceAfterMs: deps.failedReplaceAfterMs,
    ...suffix,
    ...(replicas === undefined ? {} : { replicas }),
    ...(growthCap === undefined ? {} : { growthCap }),
  });
  if (plan.kind !== 'reconcile') return plan;
  const { budget, autoscale, lookAfterMs } = scaling;
  const status = { ...plan.status, ...(budget ? { budget } : {}), ...(autoscale ? { autoscale } : {}) };
  const look = lookAfterMs === undefined ? plan.lookAfterMs : Math.min(lookAfterMs, plan.lookAfterMs ?? Number.POSITIVE_INFINITY);
  return { ...plan, status, ...(look === undefined ? {} : { lookAfterMs: look }) };
}

/** Suffixes `~1`, `~2`… (no member name has a `~`). */
function placeholders(): () => string {
  let n = 0;
  return () => `~${++n}`;
}

/** A pool's members as one read saw them, the names that read saw in use, and whether it was consistent. */
interface MemberView {
  members: Proxy[];
  taken: Set<string>;
  consistent: boolean;
}

/** `cached`: the store's label-selected list where it has one; `consistent`: every Proxy, read now. */
async function readMembers(name: string, proxies: ProxyReader, read: 'cached' | 'consistent', signal: AbortSignal): Promise<MemberView> {
  if (read === 'cached' && proxies.listPoolMembers) {
    const members = (await proxies.listPoolMembers(signal)).filter((p) => poolOf(p) === name);
    return { members, taken: new Set(members.map((p) => p.name)), consistent: false };
  }
  const all = await proxies.list(signal);
  return { members: all.filter((p) => poolOf(p) === name), taken: new Set(all.map((p) => p.name)), consistent: true };
}

/** True once the pool is being deleted (or gone): read again before each member a pass creates. */
async function deletionAccepted(name: string, deps: PoolReconcileDeps, signal: AbortSignal): Promise<boolean> {
  const current = await deps.pools.get(name, signal);
  return current === undefined || current.metadata.deletionRequestedAt !== undefined;
}

/**
 * Members of a pool that no longer exists (a pool deleted with kubectl before its first reconcile
 * put its finalizer on): nothing else would ever delete them. The pool label is the pool's alone.
 */
async function deleteStrays(name: string, deps: PoolReconcileDeps, signal: AbortSignal): Promise<void> {
  const live = (view: MemberView): Proxy[] => view.members.filter((p) => !p.metadata.deletionRequestedAt);
  let view = await readMembers(name, deps.proxies, 'cached', signal);
  if (!view.consistent && live(view).length > 0) view = await readMembers(name, deps.proxies, 'consistent', signal);
  for (const m of live(view)) {
    try {
      await deps.proxies.requestDeletion(m.name, {}, signal);
    } catch (err) {
      if (err instanceof NotFoundError) continue;
      throw err;
    }
    await deps.requestReconcile(m.name);
  }
}

async function createMember(pool: Pool, c: MemberCreation, deps: PoolReconcileDeps, signal: AbortSignal): Promise<void> {
  await deps.proxies.apply({ metadata: { name: c.name, labels: c.labels }, spec: c.spec }, signal);
  await deps.requestReconcile(c.name);
  deps.events?.record(memberCreated(pool, { name: c.name, spec: c.spec }, c.cause, c.why));
}

async function deleteMember(pool: Pool, d: MemberDeletion, deps: PoolReconcileDeps, signal: AbortSignal): Promise<void> {
  try {
    await deps.proxies.requestDeletion(d.member.name, {}, signal);
  } catch (err) {
    // Gone meanwhile (deleted by hand, or by a reconcile that finished its deletion): nothing to do.
    if (err instanceof NotFoundError) return;
    throw err;
  }
  await deps.requestReconcile(d.member.name);
  deps.events?.record(memberDeleted(pool, d.member, d.cause, d.why));
}
