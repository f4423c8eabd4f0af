import type { InstanceLocation, Proxy } from '../model/proxy-resource.ts';

/** Where a proxy's instance is (the provider and placement), and what a reconcile may conclude from it. */

export function sameLocation(a: InstanceLocation, b: InstanceLocation): boolean {
  return a.provider === b.provider && a.placement === b.placement;
}

export function describeLocation(l: InstanceLocation): string {
  return l.placement === undefined ? `provider "${l.provider}"` : `provider "${l.provider}" at "${l.placement}"`;
}

/** Where the spec wants the instance. */
export function locationOf(proxy: Proxy): InstanceLocation {
  return proxy.spec.placement === undefined ? { provider: proxy.spec.provider } : { provider: proxy.spec.provider, placement: proxy.spec.placement };
}

/**
 * After a reconcile made (or found) the instance at `here`, from a view of the proxy read before: did the
 * proxy move away or go meanwhile? That happens when a job's lock expired while its worker was slow or
 * frozen and another worker took the job over and ran it on the newer spec. Then the instance at `here`
 * is no one's: unless the proxy's record or spec still points `here` (whoever reconciles it next removes
 * it), it is `unclaimed` and the caller deletes it now rather than leave it for the GC, and looks again
 * instead of writing a status for a place the proxy has left. Returns why, or undefined when the view
 * still holds. Pure.
 */
export function movedAwayMeanwhile(current: Proxy | undefined, here: InstanceLocation, instanceName: string): { why: string; unclaimed: boolean } | undefined {
  if (current && !current.metadata.deletionRequestedAt && sameLocation(locationOf(current), here)) return undefined;
  const recorded = current?.status.instanceLocation;
  const pointedAt = current !== undefined && ((recorded !== undefined && sameLocation(recorded, here)) || sameLocation(locationOf(current), here));
  return { why: `the proxy changed while instance ${instanceName} was being made on ${describeLocation(here)}; looking again`, unclaimed: !pointedAt };
}
