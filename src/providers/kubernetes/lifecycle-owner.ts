/** The owner labels every object of a kubernetes proxy instance carries (Pod, Secret, Service), and how to check them. */
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { foreignOwner, otherProxyReason, type InstanceOwner } from '../lifecycle.ts';
import { MANAGED_LABELS } from './labels.ts';

/** Owner labels stamped next to MANAGED_LABELS. */
export const FLEET_LABEL = 'egress-proxies/fleet';
export const PROXY_LABEL = 'egress-proxies/proxy';

export function ownerLabels(owner: InstanceOwner): Record<string, string> {
  return { ...MANAGED_LABELS, [FLEET_LABEL]: owner.fleet, [PROXY_LABEL]: owner.proxy };
}

/** True when the object carries every managed label and an owner (and so may be read, listed and deleted by us). */
export function isManagedObject(obj: { metadata?: V1ObjectMeta }): boolean {
  const labels = obj.metadata?.labels ?? {};
  return Object.entries(MANAGED_LABELS).every(([k, v]) => labels[k] === v) && Boolean(labels[FLEET_LABEL]) && Boolean(labels[PROXY_LABEL]);
}

export function ownerOf(obj: { metadata?: V1ObjectMeta }): InstanceOwner {
  const labels = obj.metadata?.labels ?? {};
  return { fleet: labels[FLEET_LABEL] ?? '', proxy: labels[PROXY_LABEL] ?? '' };
}

/** Why an existing object of the instance's name cannot be used, or undefined when it is this proxy's. */
export function foreignReason(kind: string, obj: { metadata?: V1ObjectMeta }, name: string, namespace: string, owner: InstanceOwner): string | undefined {
  if (!isManagedObject(obj)) return `a ${kind} named "${name}" exists in namespace "${namespace}" without our labels; it is left alone`;
  const other = otherProxyReason(ownerOf(obj), owner);
  return other ? `${kind} "${name}" in namespace "${namespace}" ${other}` : undefined;
}

/** Why a delete must leave `obj` alone (no labels of ours, another fleet's or proxy's), or undefined when it is `owner`'s. */
export function notOwnedBy(obj: { metadata?: V1ObjectMeta }, owner: InstanceOwner): string | undefined {
  return foreignOwner(isManagedObject(obj) ? ownerOf(obj) : undefined, owner);
}
