/** The read side of the KVM lifecycle on one host's connection: one tagged domain as an Instance, or a fleet's inventory. */
import { LibvirtError, type LibvirtConnection } from '../../kvm/libvirt/index.ts';
import type { Instance } from '../lifecycle.ts';
import { describe, findDomain, readTag } from './lifecycle-ops.ts';

/** The domain `name` on the host `placement` as an Instance, when it carries our tag. */
export async function taggedInstance(
  c: LibvirtConnection,
  name: string,
  placement: string,
  port: number,
  forwarded: boolean,
  signal: AbortSignal,
): Promise<Instance | undefined> {
  const found = await findDomain(c, name, signal);
  return found?.tag ? describe(c, { dom: found.dom, tag: found.tag }, placement, port, signal, forwarded) : undefined;
}

/** Every domain on the host tagged with `fleet` (no endpoints: the sweep needs none). */
export async function fleetInstances(c: LibvirtConnection, fleet: string, placement: string, signal: AbortSignal): Promise<Instance[]> {
  // All domains at once: the client keeps 4 calls in flight and queues the rest in order.
  const all = await Promise.all(
    (await c.listAllDomains(0, signal)).map(async (dom): Promise<Instance | undefined> => {
      const tag = await readTag(c, dom, signal);
      if (!tag || tag.fleet !== fleet) return undefined;
      try {
        return await describe(c, { dom, tag }, placement, undefined, signal);
      } catch (err) {
        // Undefined between the list and the read: gone, nothing to report.
        if (err instanceof LibvirtError && err.kind === 'not-found') return undefined;
        throw err;
      }
    }),
  );
  return all.filter((i): i is Instance => i !== undefined);
}
