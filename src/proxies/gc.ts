import type { Logger } from '../logging.ts';
import { ForeignInstanceError, type Instance, type ProxyLifecycle } from '../providers/lifecycle.ts';
import type { ProxyReader } from '../store/proxy-store.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import { instanceNameFor } from './instance-name.ts';
import { formatDuration } from '../schema/duration.ts';
import type { EventSink } from '../events/event-sink.ts';
import { forEachPaced } from './paced.ts';

export type GcReason = 'no-proxy' | 'superseded';

export interface GcDeps {
  proxies: ProxyReader;
  fleet: string;
  /** Instances younger than this are never deleted (a create may still be recording its proxy). */
  graceMs: number;
  logger: Logger;
  now?: () => Date;
  onDelete?: (provider: string, reason: GcReason) => void;
  /** Where each deletion (with the instance's age) and each sweep's counts are recorded. */
  events?: EventSink;
  /**
   * Deletions started per second on this provider, at most (`gc.deletesPerSecond` of the provider, else
   * `--gc-deletes-per-second`); undefined: no limit (tests of the rules alone).
   */
  deletesPerSecond?: number;
  /**
   * With `deletesPerSecond`: how long after its start the sweep may still start deletes (less than
   * its deadline, so that it ends on its own). Orphans beyond what the pace allows in that time are
   * counted as `left` for the next sweep. Undefined: no limit.
   */
  deleteBudgetMs?: number;
}

/**
 * Deletions in flight at once: enough for the configured pace when a delete waits ~30 s for its
 * operation (gcp), and a bound on what a provider that stops answering can pile up.
 */
export function deletesInFlight(perSecond: number): number {
  return Math.max(4, Math.min(256, Math.ceil(perSecond * 30)));
}

export interface SweepResult {
  provider: string;
  seen: number;
  kept: number;
  young: number;
  deleted: { name: string; reason: GcReason }[];
  /** Orphans past the grace period this sweep had no time for (`deleteBudgetMs` at the pace): the next sweep's. */
  left: number;
  /** Listed as this fleet's, but the object read before deleting said otherwise (ForeignInstanceError): left alone. */
  refused: number;
}

/**
 * Whether a proxy's instance on this provider is still its own: its spec names the provider; or its
 * spec could not be read (specProblems: it may be anywhere); or its status still records the instance
 * there (a move away is under way: reconcile removes that instance itself before it makes the next,
 * and a move back reuses it — GC must not delete it in between).
 */
function ownsHere(proxy: Proxy, provider: string): boolean {
  return proxy.spec.provider === provider || proxy.specProblems !== undefined || proxy.status.instanceLocation?.provider === provider;
}

/**
 * One garbage-collection sweep of a provider: walks its full inventory of instances carrying
 * this fleet's owner identity (the lifecycle pages through it and never returns anything
 * without our label or tag) and deletes those no Proxy owns — except instances younger than
 * the grace period. An instance is owned when a proxy on this provider derives its name.
 *
 * Nothing is deleted before the inventory is complete: a listing that fails part-way (a page
 * answering 500, an unreachable zone or host) fails the sweep with nothing deleted, and the next
 * sweep starts over. Deletions are then paced at `deletesPerSecond`, as many as the pace allows
 * before `deleteBudgetMs` (the rest are `left` for the next sweep); the first one that fails stops
 * the rest (left for the next sweep) and fails the sweep once those in flight are done.
 */
export async function sweepProvider(provider: string, lifecycle: ProxyLifecycle, deps: GcDeps, signal: AbortSignal): Promise<SweepResult> {
  const started = performance.now();
  const now = (deps.now ?? (() => new Date()))().getTime();
  const proxies = await deps.proxies.list(signal);
  // A proxy whose spec the store could not read (specProblems) may have its instance on any provider: it keeps it on each.
  const owned = new Set(proxies.filter((p) => ownsHere(p, provider)).map((p) => instanceNameFor(deps.fleet, p)));
  const byName = new Set(proxies.map((p) => p.name));
  const result: SweepResult = { provider, seen: 0, kept: 0, young: 0, deleted: [], left: 0, refused: 0 };
  const orphans: { instance: Instance; reason: GcReason }[] = [];
  for await (const instance of lifecycle.listInstances(deps.fleet, signal)) {
    result.seen++;
    if (instance.owner.fleet !== deps.fleet || owned.has(instance.name)) {
      result.kept++;
      continue;
    }
    if (now - Date.parse(instance.createdAt) < deps.graceMs) {
      result.young++;
      continue;
    }
    orphans.push({ instance, reason: byName.has(instance.owner.proxy) ? 'superseded' : 'no-proxy' });
  }
  const pace =
    deps.deletesPerSecond === undefined
      ? { perSecond: Infinity, inFlight: 1 }
      : { perSecond: deps.deletesPerSecond, inFlight: deletesInFlight(deps.deletesPerSecond) };
  const room = deleteRoom(deps, performance.now() - started);
  const due = orphans.slice(0, room);
  result.left = orphans.length - due.length;
  await forEachPaced(
    due,
    pace,
    async ({ instance, reason }, s) => {
      // The proxy may have come back to this provider since the listing (a move there and back): read
      // it again and keep the instance when it owns it now.
      const current = await deps.proxies.get(instance.owner.proxy, s);
      if (current && ownsHere(current, provider) && instanceNameFor(deps.fleet, current) === instance.name) {
        result.kept++;
        return;
      }
      try {
        // The inventory's word is not enough: the delete reads the object again and deletes it only
        // if it still carries this fleet and this proxy; volumes go only with their tagged domain.
        await lifecycle.deleteInstance(instance.name, instance.placement, { owner: instance.owner, nameIsOurs: false }, s);
      } catch (err) {
        if (!(err instanceof ForeignInstanceError)) throw err;
        result.refused++;
        deps.logger.warn(
          { instance: instance.name, placement: instance.placement, err: err.message },
          'the inventory listed an instance that is not ours: left alone',
        );
        deps.events?.record({
          type: 'Warning',
          reason: 'GcRefused',
          object: { kind: 'ProviderHealth', name: provider },
          provider,
          message: `${err.message}: listed as this fleet's by the provider's inventory, left alone`,
          details: { instance: instance.name, provider, ...(instance.placement ? { location: instance.placement } : {}) },
        });
        return;
      }
      deps.logger.info(
        { instance: instance.name, proxy: instance.owner.proxy, placement: instance.placement, createdAt: instance.createdAt, reason },
        'garbage-collected an instance no proxy owns',
      );
      deps.onDelete?.(provider, reason);
      const age = formatDuration(Math.max(0, now - Date.parse(instance.createdAt)));
      const why = reason === 'no-proxy' ? `proxy "${instance.owner.proxy}" does not exist` : `proxy "${instance.owner.proxy}" now has another instance`;
      deps.events?.record({
        type: 'Normal',
        reason: 'InstanceDeleted',
        object: { kind: 'Proxy', name: instance.owner.proxy },
        provider,
        message: `orphan instance ${instance.name}${instance.placement ? ` on ${provider}/${instance.placement}` : ` on ${provider}`}, ${age} old, garbage-collected: ${why}`,
        details: {
          instance: instance.name,
          cause: 'gc-orphan',
          gcReason: reason,
          age,
          ageSeconds: Math.round(Math.max(0, now - Date.parse(instance.createdAt)) / 1000),
          provider,
          ...(instance.placement ? { location: instance.placement } : {}),
        },
      });
      result.deleted.push({ name: instance.name, reason });
    },
    signal,
  );
  deps.events?.record({
    type: 'Normal',
    reason: 'GcSweep',
    object: { kind: 'ProviderHealth', name: provider },
    provider,
    message: `swept ${result.seen} instance(s): ${result.deleted.length} deleted, ${result.kept} owned, ${result.young} too young to collect${
      result.left ? `, ${result.left} left for the next sweep (at ${deps.deletesPerSecond} deletions per second)` : ''
    }${result.refused ? `, ${result.refused} refused (not ours when read again)` : ''}`,
    details: {
      seen: result.seen,
      deleted: result.deleted.length,
      kept: result.kept,
      young: result.young,
      ...(result.left ? { left: result.left } : {}),
      ...(result.refused ? { refused: result.refused } : {}),
    },
  });
  return result;
}

/** How many deletes fit in what is left of `deleteBudgetMs` at the pace (the first starts at once); all without a budget. */
function deleteRoom(deps: GcDeps, elapsedMs: number): number {
  if (deps.deletesPerSecond === undefined || deps.deleteBudgetMs === undefined) return Infinity;
  const remainingMs = deps.deleteBudgetMs - elapsedMs;
  return remainingMs <= 0 ? 0 : Math.floor((remainingMs / 1000) * deps.deletesPerSecond) + 1;
}
