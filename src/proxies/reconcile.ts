import { findCause } from '../errors.ts';
import type { NewEvent } from '../events/event-sink.ts';
import type { InstanceLocation, Proxy } from '../model/proxy-resource.ts';
import { ProvisioningError, type Instance, type InstanceOwner, type ProxyLifecycle } from '../providers/lifecycle.ts';
import { NO_REDACTION, proxySecretOwner } from '../secrets/secret-registry.ts';
import type { ReconcileStore } from '../store/proxy-store.ts';
import { withReadyCondition } from './conditions.ts';
import { deleteOwnInstance } from './delete-own-instance.ts';
import { DEFAULT_READINESS, type ReadinessHooks, type ReadinessPolicy, type ReadinessProbe } from './readiness-contract.ts';
import { failure, type Fail, type Finish, type ReconcileOutcome, type Removal, type StatusUpdate, type Target } from './reconcile-decisions.ts';
import { afterPass, afterProbeFailure } from './readiness-plan.ts';
import {
  afterDeletionRemoval,
  afterInstance,
  afterMoveRemoval,
  deletionDone,
  instanceSeen,
  locationRecord,
  missingCredentials,
  movedAway,
  planStart,
  provisioningFailed,
  removalAt,
} from './reconcile-plan.ts';

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
 * Level-triggered reconcile of one proxy: reads desired (the Proxy) and observed (the instance)
 * state and acts idempotently. The instance name is derived from the proxy's identity and the
 * create is idempotent on it, so a retried, duplicated or crashed reconcile never makes a second
 * instance. Deletion finishes only when the instance is gone. What to do at each step is decided
 * by the plan (reconcile-plan.ts, readiness-plan.ts); this carries it out: the store, the
 * lifecycles, the probe, the hooks, the events and the redaction.
 */
export async function reconcileProxy(name: string, deps: ReconcileDeps, signal: AbortSignal): Promise<ReconcileOutcome> {
  const proxy = await deps.proxies.get(name, signal);
  if (!proxy) return { kind: 'gone' };
  const run: Run = { proxy, deps, signal, owner: { fleet: deps.fleet, proxy: name } };
  const start = planStart(proxy, deps.fleet, deps.lifecycles);
  switch (start.kind) {
    case 'finish':
      return finish(run, start);
    case 'fail':
      return fail(run, start);
    case 'delete':
      return deleteProxy(run, start.target, start.places);
    case 'provision':
      return provision(run, start.target, start.lifecycle);
  }
}

/** One reconcile's proxy (as first read), dependencies and signal. */
interface Run {
  proxy: Proxy;
  deps: ReconcileDeps;
  signal: AbortSignal;
  owner: InstanceOwner;
}

/** Credentials, a move's removal, the location record, the create, the probe: each step's result goes to the plan. */
async function provision(run: Run, target: Target, lifecycle: ProxyLifecycle): Promise<ReconcileOutcome> {
  const { proxy, deps, signal } = run;
  const credentials = await deps.proxies.credentials(proxy.name, signal);
  if (!credentials) return finish(run, missingCredentials());
  // Known before any peer is told them, so any error quoting them is redacted.
  deps.secrets?.setCredentials(proxySecretOwner(proxy.name), credentials);

  if (target.moveFrom) {
    const next = afterMoveRemoval(proxy, target, target.moveFrom, await removeFrom(run, target.moveFrom, target.instanceName));
    if (next.kind === 'finish') return finish(run, next);
    record(run, next.events);
  }
  const located = locationRecord(proxy, target);
  if (located) await writeStatus(run, located);
  let instance: Instance;
  try {
    instance = await lifecycle.ensureInstance({ name: target.instanceName, owner: run.owner, credentials, placement: proxy.spec.placement }, signal);
  } catch (err) {
    const provisioning = findCause(err, ProvisioningError);
    if (!provisioning) throw err;
    return fail(run, provisioningFailed(target, provisioning.message));
  }
  const away = movedAway(await deps.proxies.get(proxy.name, signal), target);
  if (away) {
    if (away.deleteInstance) await deleteOwnInstance(lifecycle, target.instanceName, target.here.placement, run.owner, signal);
    return away.outcome;
  }
  record(run, instanceSeen(proxy, target, instance));
  const running = afterInstance(proxy, target, instance);
  if (running.kind === 'fail') return fail(run, running);
  if (running.kind === 'finish') return finish(run, running);
  record(run, running.events);

  const probed = await deps.probe(running.endpoint, proxy, signal, credentials);
  deps.onProbe?.(proxy.spec.provider, probed.ok, probed.durationSeconds);
  const policy = deps.readiness ?? DEFAULT_READINESS;
  if (probed.ok) return finish(run, afterPass(proxy, target, instance, running.url, probed.egressIp, policy));
  const failed = afterProbeFailure(proxy, target, instance, running.url, probed, policy, now(deps));
  if (failed.eviction) {
    deps.onEvicted?.(proxy.spec.provider, failed.eviction.cause, failed.eviction.readySeconds);
    record(run, [failed.eviction.event]);
  }
  if (failed.replacement) {
    await deleteOwnInstance(lifecycle, failed.replacement.instanceName, failed.replacement.placement, run.owner, signal);
    deps.onReplace?.(proxy.spec.provider);
    record(run, [failed.replacement.event]);
  }
  await writeStatus(run, failed.status);
  return failed.outcome;
}

/**
 * Deletion: the instance is removed from every place the plan names (where it was made and, during
 * a move, where the spec points), then the proxy and its credentials are forgotten. A provider that
 * is not configured leaves the proxy Terminating with the reason, unless the deletion orphans.
 */
async function deleteProxy(run: Run, target: Target, places: InstanceLocation[]): Promise<ReconcileOutcome> {
  for (const [i, where] of places.entries()) {
    const next = afterDeletionRemoval(run.proxy, target, where, i === 0, await removeFrom(run, where, target.instanceName));
    if (next.kind === 'finish') return finish(run, next);
    record(run, next.events);
  }
  const done = deletionDone(run.proxy);
  await run.deps.proxies.remove(run.proxy.name, run.signal);
  run.deps.secrets?.forget(proxySecretOwner(run.proxy.name));
  record(run, done.events);
  return done.outcome;
}

/** Deletes the instance at `where` and says whether it is gone. */
async function removeFrom(run: Run, where: InstanceLocation, instanceName: string): Promise<Removal> {
  const how = removalAt(where, instanceName, run.deps.lifecycles);
  if (how.kind === 'unreachable') return how;
  const deleted = await deleteOwnInstance(how.lifecycle, instanceName, where.placement, run.owner, run.signal);
  // Another owner's object at this proxy's name is left alone: nothing of the proxy's is there.
  if (deleted.kind === 'foreign') return { kind: 'removed' };
  return (await how.lifecycle.getInstance(instanceName, where.placement, run.signal)) ? { kind: 'pending' } : { kind: 'removed' };
}

async function finish(run: Run, decision: Finish): Promise<ReconcileOutcome> {
  if (decision.status) await writeStatus(run, decision.status);
  record(run, decision.events);
  return decision.outcome;
}

/** Every failure branch ends here, so its message is redacted once for the status, the Failed event and the outcome (the job keeps it). */
function fail(run: Run, decision: Fail): Promise<ReconcileOutcome> {
  return finish(run, failure(run.proxy, (run.deps.secrets ?? NO_REDACTION).redact(decision.message), decision.patch));
}

/** Every status write of reconcile goes through here, so the Ready condition always follows the phase. */
function writeStatus(run: Run, update: StatusUpdate): Promise<Proxy | undefined> {
  const at = now(run.deps);
  return run.deps.proxies.updateStatus(
    run.proxy.name,
    (p) => {
      const next = update(p);
      return next ? withReadyCondition(next, at, run.deps.secrets) : undefined;
    },
    run.signal,
  );
}

function record(run: Run, events: readonly NewEvent[]): void {
  for (const event of events) run.deps.events?.record(event);
}

function now(deps: ReconcileDeps): Date {
  return (deps.now ?? (() => new Date()))();
}
