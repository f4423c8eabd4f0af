import { findCause } from '../errors.ts';
import { ProvisioningError, type Instance, type InstanceOwner, type ProxyLifecycle } from '../providers/lifecycle.ts';
import { deleteOwnInstance } from './delete-own-instance.ts';
import type { ReconcileStore } from '../store/proxy-store.ts';
import { withReadyCondition } from './conditions.ts';
import { afterFailure, passesNeeded, readySeconds } from './eviction.ts';
import {
  DEFAULT_READINESS,
  evictionCauseOf,
  type ProbeFailureCause,
  type ReadinessHooks,
  type ReadinessPolicy,
  type ReadinessProbe,
} from './readiness-contract.ts';
import { instanceNameFor } from './instance-name.ts';
import { describeLocation, locationOf, movedAwayMeanwhile, sameLocation } from './location.ts';
import type { InstanceLocation, Proxy, ProxyStatus } from '../model/proxy-resource.ts';
import * as ev from '../events/proxy-events.ts';
import { resourceName } from '../schema/zod-helpers.ts';
import { NO_REDACTION, proxySecretOwner } from '../secrets/secret-registry.ts';

/** Only for test/proxies/reconcile.test.ts, which still imports the probe's type from here: the contract is readiness-contract.ts. */
export type { ReadinessProbe } from './readiness-contract.ts';

export interface ReconcileDeps extends ReadinessHooks {
  proxies: ReconcileStore;
  readiness?: ReadinessPolicy;
  /** The lifecycle of each configured provider that can host proxies. */
  lifecycles: ReadonlyMap<string, ProxyLifecycle>;
  fleet: string;
  probe: ReadinessProbe;
  now?: () => Date;
}

/**
 * What a reconcile concluded. `retry-later` means "look again soon" (an instance still
 * starting or still being deleted): the caller schedules the next look, it is not an error.
 */
export type ReconcileOutcome =
  { kind: 'gone' } | { kind: 'deleted' } | { kind: 'ready'; url: string } | { kind: 'failed'; message: string } | { kind: 'retry-later'; why: string };

/** Every status write of reconcile goes through here, so the Ready condition always follows the phase. */
function writeStatus(deps: ReconcileDeps, name: string, update: (p: Proxy) => ProxyStatus | undefined, signal: AbortSignal): Promise<Proxy | undefined> {
  const now = (deps.now ?? (() => new Date()))();
  return deps.proxies.updateStatus(
    name,
    (p) => {
      const next = update(p);
      return next ? withReadyCondition(next, now, deps.secrets) : undefined;
    },
    signal,
  );
}

function status(proxy: Proxy, patch: Partial<ProxyStatus>): ProxyStatus {
  return { ...proxy.status, ...patch, observedGeneration: proxy.metadata.generation };
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

/**
 * Fails the proxy for this generation with `message` (status, a Failed event and the outcome, which
 * the job keeps as its return value), with `patch` (the instance it concerns) in the status. The one
 * way out of every failure branch, so the message is redacted once for all three.
 */
async function failWith(proxy: Proxy, failure: string, deps: ReconcileDeps, signal: AbortSignal, patch: Partial<ProxyStatus> = {}): Promise<ReconcileOutcome> {
  const message = (deps.secrets ?? NO_REDACTION).redact(failure);
  await writeStatus(deps, proxy.name, (p) => status(p, { ...patch, phase: 'Failed', lastError: message }), signal);
  deps.events?.record(ev.failed(proxy, message));
  return { kind: 'failed', message };
}

/**
 * Level-triggered reconcile of one proxy: reads desired (the Proxy) and observed (the instance)
 * state and acts idempotently. The instance name is derived from the proxy's identity and the
 * create is idempotent on it, so a retried, duplicated or crashed reconcile never makes a second
 * instance. Deletion finishes only when the instance is gone.
 */
export async function reconcileProxy(name: string, deps: ReconcileDeps, signal: AbortSignal): Promise<ReconcileOutcome> {
  const proxy = await deps.proxies.get(name, signal);
  if (!proxy) return { kind: 'gone' };
  const lifecycle = deps.lifecycles.get(proxy.spec.provider);
  const instanceName = instanceNameFor(deps.fleet, proxy);
  const placement = proxy.spec.placement;
  const here: InstanceLocation = { provider: proxy.spec.provider, ...(placement === undefined ? {} : { placement }) };
  const recorded = proxy.status.instanceLocation;
  const moving = recorded !== undefined && !sameLocation(recorded, here);

  // A spec that broke its schema says nothing of where an instance is: only the recorded place is cleared (GC takes any other).
  const places = proxy.specProblems ? (recorded ? [recorded] : []) : moving ? [recorded, here] : [here];
  if (proxy.metadata.deletionRequestedAt) return deleteProxy(proxy, instanceName, places, deps, signal);
  if (proxy.status.phase === 'Failed' && proxy.status.observedGeneration === proxy.metadata.generation) {
    // Failed is final for this generation: the periodic resync must not retry a create that
    // cannot work (a quota, an invalid image) over and over. Applying a change retries it.
    return { kind: 'failed', message: proxy.status.lastError ?? 'failed' };
  }
  const refusal = refusalOf(proxy);
  if (refusal !== undefined) return failWith(proxy, refusal, deps, signal);
  if (!lifecycle) return failWith(proxy, `provider "${proxy.spec.provider}" is not configured in this worker or cannot host proxies`, deps, signal);
  const credentials = await deps.proxies.credentials(name, signal);
  if (!credentials) return { kind: 'retry-later', why: 'credentials not written yet' };
  // Known before any peer is told them, so any error quoting them is redacted.
  deps.secrets?.setCredentials(proxySecretOwner(name), credentials);

  if (moving) {
    const removal = await removeFrom(recorded, instanceName, { fleet: deps.fleet, proxy: name }, deps, signal);
    if (removal.kind !== 'removed') {
      const why =
        removal.kind === 'unreachable' ? removal.why : `moving from ${describeLocation(recorded)}: instance ${instanceName} there is still being deleted`;
      await writeStatus(
        deps,
        name,
        (p) => ({ ...withoutEndpoint(p.status), phase: 'Provisioning', lastError: why, observedGeneration: p.metadata.generation }),
        signal,
      );
      return removal.kind === 'unreachable' ? { kind: 'failed', message: why } : { kind: 'retry-later', why };
    }
    if (proxy.status.instanceName) deps.events?.record(ev.instanceDeleted(proxy, instanceName, recorded, 'move', `now on ${describeLocation(here)}`));
  }
  if (proxy.status.phase === 'Pending' || moving || !recorded) {
    // Recorded before the create, so that a crash after it still knows where the instance is.
    await writeStatus(
      deps,
      name,
      (p) => {
        const base = moving ? withoutEndpoint(p.status) : p.status;
        const phase = p.status.phase === 'Ready' && !moving ? 'Ready' : 'Provisioning';
        return { ...base, phase, instanceName, instanceLocation: here, observedGeneration: p.metadata.generation };
      },
      signal,
    );
  }
  let instance: Instance;
  try {
    instance = await lifecycle.ensureInstance({ name: instanceName, owner: { fleet: deps.fleet, proxy: name }, credentials, placement }, signal);
  } catch (err) {
    const provisioning = findCause(err, ProvisioningError);
    if (!provisioning) throw err;
    return failWith(proxy, provisioning.message, deps, signal, { instanceName });
  }
  const stale = await movedAwayMeanwhile(await deps.proxies.get(name, signal), here, instanceName, { fleet: deps.fleet, proxy: name }, lifecycle, signal);
  if (stale) return { kind: 'retry-later', why: stale };
  if (proxy.status.instanceId !== instance.id) deps.events?.record(ev.instanceCreated(proxy, instance, here, creationCause(proxy, moving)));
  if (instance.state === 'failed') {
    return failWith(proxy, instance.message ?? `instance ${instanceName} failed`, deps, signal, { instanceName, instanceId: instance.id });
  }
  if (instance.state !== 'running' || !instance.endpoint) {
    await writeStatus(
      deps,
      name,
      (p) => status(p, { phase: 'Provisioning', instanceName, instanceId: instance.id, ...(instance.message ? { lastError: instance.message } : {}) }),
      signal,
    );
    return { kind: 'retry-later', why: `instance ${instanceName} is ${instance.state}${instance.message ? `: ${instance.message}` : ''}` };
  }
  const url = `http://${instance.endpoint.host}:${instance.endpoint.port}`;
  if (proxy.status.instanceId !== instance.id || proxy.status.url === undefined) deps.events?.record(ev.instanceStarted(proxy, instance, here, url));
  const probed = await deps.probe(instance.endpoint, proxy, signal, credentials);
  deps.onProbe?.(proxy.spec.provider, probed.ok, probed.durationSeconds);
  if (!probed.ok) return probeFailed(proxy, instance, url, probed, deps, signal);
  const needed = passesNeeded(proxy.status, instance.id, deps.readiness ?? DEFAULT_READINESS);
  const passes = (proxy.status.probeSuccesses ?? 0) + 1;
  if (passes < needed) {
    // Coming back after failures: the same instance must pass --probe-successes probes in a row.
    await writeStatus(deps, name, (p) => status(p, { instanceName, instanceId: instance.id, url, probeSuccesses: passes }), signal);
    return { kind: 'retry-later', why: `readiness probe passed (${passes} of ${needed} in a row needed to return)` };
  }
  await writeStatus(
    deps,
    name,
    (p) => {
      // Moved away while the probe ran: the next reconcile (the move's) writes the status.
      if (!sameLocation(locationOf(p), here) || p.metadata.deletionRequestedAt) return undefined;
      const { lastError: _drop, unreadySince: _since, probeSuccesses: _passes, ...rest } = p.status;
      return {
        ...rest,
        phase: 'Ready',
        instanceName,
        instanceId: instance.id,
        url,
        egressIp: probed.egressIp,
        probeFailures: 0,
        observedGeneration: p.metadata.generation,
      };
    },
    signal,
  );
  // A move took it out of discovery (Provisioning) on the way, even when it was Ready before.
  if (proxy.status.phase !== 'Ready' || moving) deps.events?.record(ev.becameReady(proxy, url, probed.egressIp));
  return { kind: 'ready', url };
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

type Removal = { kind: 'removed' } | { kind: 'pending' } | { kind: 'unreachable'; why: string };

/** Deletes the instance at `where` and says whether it is gone. */
async function removeFrom(where: InstanceLocation, instanceName: string, owner: InstanceOwner, deps: ReconcileDeps, signal: AbortSignal): Promise<Removal> {
  const lifecycle = deps.lifecycles.get(where.provider);
  if (!lifecycle) {
    return {
      kind: 'unreachable',
      why: `instance ${instanceName} is on ${describeLocation(where)}, which is not configured in this worker or cannot host proxies, so it cannot be removed; configure the provider again, or delete the proxy with --orphan to forget it and leave the instance`,
    };
  }
  const deleted = await deleteOwnInstance(lifecycle, instanceName, where.placement, owner, signal);
  // Another owner's object at this proxy's name is left alone: nothing of the proxy's is there.
  if (deleted.kind === 'foreign') return { kind: 'removed' };
  return (await lifecycle.getInstance(instanceName, where.placement, signal)) ? { kind: 'pending' } : { kind: 'removed' };
}

/**
 * Deletion: the instance is removed from every place it may be (where it was made and, during a
 * move, where the spec points), then the proxy and its credentials are forgotten. A provider that
 * is not configured leaves the proxy Terminating with the reason, unless the deletion orphans.
 */
async function deleteProxy(
  proxy: Proxy,
  instanceName: string,
  places: InstanceLocation[],
  deps: ReconcileDeps,
  signal: AbortSignal,
): Promise<ReconcileOutcome> {
  if (!proxy.metadata.orphanInstance) {
    for (const where of places) {
      const removal = await removeFrom(where, instanceName, { fleet: deps.fleet, proxy: proxy.name }, deps, signal);
      if (removal.kind === 'pending') return { kind: 'retry-later', why: `instance ${instanceName} is still being deleted` };
      if (removal.kind === 'unreachable') {
        await writeStatus(deps, proxy.name, (p) => (p.status.lastError === removal.why ? undefined : { ...p.status, lastError: removal.why }), signal);
        return { kind: 'failed', message: removal.why };
      }
      // The place where an instance was made (the first of `places`); the other is only looked at.
      if (proxy.status.instanceName && where === places[0]) deps.events?.record(ev.instanceDeleted(proxy, instanceName, where, 'delete'));
    }
  }
  await deps.proxies.remove(proxy.name, signal);
  deps.secrets?.forget(proxySecretOwner(proxy.name));
  deps.events?.record(ev.proxyDeleted(proxy));
  return { kind: 'deleted' };
}

/** How `lastError` starts once an unready proxy's instance was replaced (the next instance's cause reads it). */
const REPLACED = 'replaced:';

/**
 * A failed readiness probe. A Ready proxy leaves discovery (Provisioning) once `failureThreshold`
 * probes in a row have failed (the first, by default); once unready for `replaceAfterMs`, its
 * instance is deleted so that the next look makes a fresh one.
 */
async function probeFailed(
  proxy: Proxy,
  instance: Instance,
  url: string,
  probed: { cause: ProbeFailureCause; message: string },
  deps: ReconcileDeps,
  signal: AbortSignal,
): Promise<ReconcileOutcome> {
  const policy = deps.readiness ?? DEFAULT_READINESS;
  const now = (deps.now ?? (() => new Date()))();
  const message = probed.message;
  const next = afterFailure(proxy.status, message, policy, now);
  const failures = next.status.probeFailures ?? 1;
  const unreadySince = next.status.phase === 'Ready' ? undefined : (next.status.unreadySince ?? now.toISOString());
  if (next.evicted) {
    deps.onEvicted?.(proxy.spec.provider, evictionCauseOf(probed.cause), readySeconds(proxy.status, now));
    deps.events?.record(ev.becameNotReady(proxy, evictionCauseOf(probed.cause), message));
  }
  const replace = unreadySince !== undefined && now.getTime() - Date.parse(unreadySince) >= policy.replaceAfterMs;
  if (replace) {
    const lifecycle = deps.lifecycles.get(proxy.spec.provider);
    if (lifecycle) await deleteOwnInstance(lifecycle, instance.name, proxy.spec.placement, { fleet: deps.fleet, proxy: proxy.name }, signal);
    deps.onReplace?.(proxy.spec.provider);
    deps.events?.record(ev.instanceDeleted(proxy, instance.name, locationOf(proxy), 'replace', `unready since ${unreadySince}`));
  }
  await writeStatus(
    deps,
    proxy.name,
    (p) => {
      const { probeSuccesses: _passes, ...rest } = p.status;
      return {
        ...rest,
        observedGeneration: p.metadata.generation,
        phase: next.status.phase === 'Ready' ? 'Ready' : 'Provisioning',
        instanceName: instance.name,
        instanceId: instance.id,
        url,
        probeFailures: replace ? 0 : failures,
        unreadySince: replace ? undefined : unreadySince,
        lastError: replace ? `${REPLACED} unready since ${unreadySince ?? ''} (${message})` : message,
      };
    },
    signal,
  );
  return { kind: 'retry-later', why: `readiness probe failed (${failures} in a row): ${message}` };
}
