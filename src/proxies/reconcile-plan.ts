import type { NewEvent } from '../events/event-sink.ts';
import * as ev from '../events/proxy-events.ts';
import type { InstanceLocation, Proxy, ProxyStatus } from '../model/proxy-resource.ts';
import type { Instance } from '../providers/lifecycle.ts';
import { resourceName } from '../schema/zod-helpers.ts';
import { describeLocation, movedAwayMeanwhile } from './location.ts';
import { REPLACED } from './readiness-plan.ts';
import {
  finish,
  goOn,
  withPatch,
  targetOf,
  type Fail,
  type Finish,
  type GoOn,
  type ReconcileOutcome,
  type Removal,
  type StatusUpdate,
  type Target,
} from './reconcile-decisions.ts';

/**
 * The decisions of a proxy's reconcile up to its readiness probe (readiness-plan.ts takes it from
 * there). Each function takes what the reconcile has observed so far (the proxy, the configured
 * providers, the instance) and says what to do next as data; none reads or writes anything. The
 * executor (reconcile.ts) does the I/O between.
 */

/** The first decision; `delete` and `provision` go on with the I/O (`lifecycle`: the configured provider's, handed back untouched). */
export type Start<L> = Finish | Fail | { kind: 'delete'; target: Target; places: InstanceLocation[] } | { kind: 'provision'; target: Target; lifecycle: L };

/** What to do with `proxy`, given the configured providers that can host proxies (by name). */
export function planStart<L>(proxy: Proxy, fleet: string, lifecycles: ReadonlyMap<string, L>): Start<L> {
  const target = targetOf(proxy, fleet);
  const { here, recorded, moveFrom } = target;
  if (proxy.metadata.deletionRequestedAt) {
    // Every place an instance may be. A spec that broke its schema says nothing of where an instance is:
    // only the recorded place is cleared (GC takes any other). An orphaning deletion removes none.
    const places = proxy.metadata.orphanInstance ? [] : proxy.specProblems ? (recorded ? [recorded] : []) : moveFrom ? [moveFrom, here] : [here];
    return { kind: 'delete', target, places };
  }
  if (proxy.status.phase === 'Failed' && proxy.status.observedGeneration === proxy.metadata.generation) {
    // Failed is final for this generation: the periodic resync must not retry a create that
    // cannot work (a quota, an invalid image) over and over. Applying a change retries it.
    return finish({ kind: 'failed', message: proxy.status.lastError ?? 'failed' });
  }
  const refusal = refusalOf(proxy);
  if (refusal !== undefined) return { kind: 'fail', message: refusal, patch: {} };
  const lifecycle = lifecycles.get(proxy.spec.provider);
  if (!lifecycle) return { kind: 'fail', message: `provider "${proxy.spec.provider}" is not configured in this worker or cannot host proxies`, patch: {} };
  return { kind: 'provision', target, lifecycle };
}

/** How to remove the instance at `where`: with that provider's lifecycle, or not at all (not configured here). */
export function removalAt<L>(
  where: InstanceLocation,
  instanceName: string,
  lifecycles: ReadonlyMap<string, L>,
): { kind: 'delete'; lifecycle: L } | Extract<Removal, { kind: 'unreachable' }> {
  const lifecycle = lifecycles.get(where.provider);
  if (lifecycle) return { kind: 'delete', lifecycle };
  return {
    kind: 'unreachable',
    why: `instance ${instanceName} is on ${describeLocation(where)}, which is not configured in this worker or cannot host proxies, so it cannot be removed; configure the provider again, or delete the proxy with --orphan to forget it and leave the instance`,
  };
}

/** A deletion after removing the instance at `where` (`madeThere`: the first of the places, where an instance was made). */
export function afterDeletionRemoval(proxy: Proxy, target: Target, where: InstanceLocation, madeThere: boolean, removal: Removal): Finish | GoOn {
  if (removal.kind === 'pending') return finish({ kind: 'retry-later', why: `instance ${target.instanceName} is still being deleted` });
  if (removal.kind === 'unreachable') {
    // The proxy stays Terminating with the reason (written once).
    const why = removal.why;
    return finish({ kind: 'failed', message: why }, (p) => (p.status.lastError === why ? undefined : { ...p.status, lastError: why }));
  }
  return goOn(proxy.status.instanceName && madeThere ? [ev.instanceDeleted(proxy, target.instanceName, where, 'delete')] : []);
}

/** Every instance is gone: forget the proxy (and its credentials). */
export function deletionDone(proxy: Proxy): { kind: 'forget'; events: NewEvent[]; outcome: ReconcileOutcome } {
  return { kind: 'forget', events: [ev.proxyDeleted(proxy)], outcome: { kind: 'deleted' } };
}

/** No credentials stored yet (the API writes them with the proxy): nothing can be made without them. */
export function missingCredentials(): Finish {
  return finish({ kind: 'retry-later', why: 'credentials not written yet' });
}

/** A move after removing the instance at `from`: made elsewhere only once that one is gone. */
export function afterMoveRemoval(proxy: Proxy, target: Target, from: InstanceLocation, removal: Removal): Finish | GoOn {
  if (removal.kind !== 'removed') {
    const why =
      removal.kind === 'unreachable' ? removal.why : `moving from ${describeLocation(from)}: instance ${target.instanceName} there is still being deleted`;
    return finish(removal.kind === 'unreachable' ? { kind: 'failed', message: why } : { kind: 'retry-later', why }, (p) => ({
      ...withoutEndpoint(p.status),
      phase: 'Provisioning',
      lastError: why,
      observedGeneration: p.metadata.generation,
    }));
  }
  return goOn(proxy.status.instanceName ? [ev.instanceDeleted(proxy, target.instanceName, from, 'move', `now on ${describeLocation(target.here)}`)] : []);
}

/** Where the instance is made, recorded before the create so that a crash after it still knows; undefined when already recorded. */
export function locationRecord(proxy: Proxy, target: Target): StatusUpdate | undefined {
  const moving = target.moveFrom !== undefined;
  if (proxy.status.phase !== 'Pending' && !moving && target.recorded) return undefined;
  return (p) => {
    const base = moving ? withoutEndpoint(p.status) : p.status;
    const phase = p.status.phase === 'Ready' && !moving ? 'Ready' : 'Provisioning';
    return { ...base, phase, instanceName: target.instanceName, instanceLocation: target.here, observedGeneration: p.metadata.generation };
  };
}

/** The provider refused to make the instance (a quota, an invalid image). */
export function provisioningFailed(target: Target, message: string): Fail {
  return { kind: 'fail', message, patch: { instanceName: target.instanceName } };
}

/** From the proxy as read again after the create: moved or gone meanwhile? Then look again, deleting the instance if no one claims it. */
export function movedAway(current: Proxy | undefined, target: Target): { kind: 'moved-away'; deleteInstance: boolean; outcome: ReconcileOutcome } | undefined {
  const away = movedAwayMeanwhile(current, target.here, target.instanceName);
  return away && { kind: 'moved-away', deleteInstance: away.unclaimed, outcome: { kind: 'retry-later', why: away.why } };
}

/** The events of finding `instance`: created, when the proxy did not have it. */
export function instanceSeen(proxy: Proxy, target: Target, instance: Instance): NewEvent[] {
  if (proxy.status.instanceId === instance.id) return [];
  return [ev.instanceCreated(proxy, instance, target.here, creationCause(proxy, target.moveFrom !== undefined))];
}

export interface Probe {
  kind: 'probe';
  endpoint: { host: string; port: number };
  url: string;
  events: NewEvent[];
}

/** After the create: failed, still starting, or running (probe it at `url`). */
export function afterInstance(proxy: Proxy, target: Target, instance: Instance): Fail | Finish | Probe {
  const instanceName = target.instanceName;
  if (instance.state === 'failed')
    return { kind: 'fail', message: instance.message ?? `instance ${instanceName} failed`, patch: { instanceName, instanceId: instance.id } };
  if (instance.state !== 'running' || !instance.endpoint) {
    return finish({ kind: 'retry-later', why: `instance ${instanceName} is ${instance.state}${instance.message ? `: ${instance.message}` : ''}` }, (p) =>
      withPatch(p, { phase: 'Provisioning', instanceName, instanceId: instance.id, ...(instance.message ? { lastError: instance.message } : {}) }),
    );
  }
  const url = `http://${instance.endpoint.host}:${instance.endpoint.port}`;
  const started = proxy.status.instanceId !== instance.id || proxy.status.url === undefined;
  return { kind: 'probe', endpoint: instance.endpoint, url, events: started ? [ev.instanceStarted(proxy, instance, target.here, url)] : [] };
}

/**
 * Why a proxy never reaches a provider, or undefined: a name the API refuses (kubectl, with the
 * Kubernetes store, can write any DNS subdomain, and such a name cannot be an instance name, job id
 * or metric label), or a spec the store read as breaking the API's schema (written around the API).
 */
function refusalOf(proxy: Proxy): string | undefined {
  if (!resourceName.safeParse(proxy.name).success)
    return `metadata.name: expected a lower-case name of letters, digits and dashes, at most 63 characters, got "${proxy.name}"`;
  if (proxy.specProblems) return `Proxy "${proxy.name}": ${proxy.specProblems.join('; ')}`;
  return undefined;
}

/** Why reconcile is making an instance the proxy did not have: its first, a move, or after the last one went away. */
function creationCause(proxy: Proxy, moving: boolean): 'apply' | 'move' | 'replace' | 'recreate' {
  if (moving) return 'move';
  if (proxy.status.instanceId === undefined) return 'apply';
  return proxy.status.lastError?.startsWith(REPLACED) ? 'replace' : 'recreate';
}

/** The status without what described a reachable instance (it is being moved). */
function withoutEndpoint(s: ProxyStatus): ProxyStatus {
  const { url: _url, egressIp: _ip, instanceId: _id, probeFailures: _f, probeSuccesses: _p, unreadySince: _u, ...rest } = s;
  return rest;
}
