/** Which of the KVM provider's hosts an instance lives on: its `placement` (the host's name), or a stable pick by name. */
import { ProvisioningError } from '../lifecycle.ts';
import type { KvmHostConfig } from './config.ts';

export interface HostPlacement {
  /** The host named `placement`; ProvisioningError when the provider has none of that name. */
  named(placement: string): KvmHostConfig;
  /** Where a new instance goes: its placement, or the host its name hashes to. */
  forInstance(name: string, placement: string | undefined): KvmHostConfig;
  /** Where an instance may be: the host of its placement, or every host when it has none. */
  candidates(placement: string | undefined): KvmHostConfig[];
}

/** A stable host for a name when the spec has no placement (FNV-1a). */
function hashIndex(name: string, n: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return (h >>> 0) % n;
}

export function hostPlacement(hosts: readonly KvmHostConfig[]): HostPlacement {
  const named = (placement: string): KvmHostConfig => {
    const host = hosts.find((h) => h.name === placement);
    if (!host) throw new ProvisioningError(`unknown KVM host "${placement}" (hosts: ${hosts.map((h) => h.name).join(', ')})`);
    return host;
  };
  return {
    named,
    forInstance: (name, placement) => (placement !== undefined ? named(placement) : hosts[hashIndex(name, hosts.length)]!),
    candidates: (placement) => (placement === undefined ? [...hosts] : [named(placement)]),
  };
}
