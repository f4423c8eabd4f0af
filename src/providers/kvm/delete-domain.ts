/**
 * The delete path of the KVM lifecycle on one host's connection: the domain goes only when it carries
 * the expected owner's tag, its volumes with it (or, with no domain left, by a name the caller derived).
 */
import type { LibvirtConnection } from '../../kvm/libvirt/index.ts';
import type { Logger } from '../../logging.ts';
import { ForeignInstanceError, foreignOwner, type DeleteTarget } from '../lifecycle.ts';
import type { KvmHostConfig } from './config.ts';
import { deleteVolume, findDomain, removeDomain, volumeName } from './lifecycle-ops.ts';
import { seedVolumeName } from './seed.ts';

export async function deleteOwnDomain(
  c: LibvirtConnection,
  host: KvmHostConfig,
  name: string,
  { owner, nameIsOurs }: DeleteTarget,
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
  const hlog = log.child({ host: host.name, instance: name });
  const found = await findDomain(c, name, signal);
  const foreign = found ? foreignOwner(found.tag, owner) : undefined;
  if (foreign) {
    hlog.warn({ reason: foreign }, 'domain is not ours; not deleting it or its volumes');
    throw new ForeignInstanceError(name, `domain on host "${host.name}": ${foreign}`);
  }
  // Volumes carry no owner of their own: they go with the tagged domain that owned them, or —
  // a crashed create's leftovers, with no domain — by a name the caller derived itself (never
  // by a name an inventory answered: the domain may have been another fleet's all along).
  if (!found && !nameIsOurs) {
    hlog.info('domain already gone; its volumes are left to the reconcile of their proxy');
    return;
  }
  if (found) await removeDomain(c, found.dom, signal);
  const storagePool = await c.storagePoolLookupByName(host.pool, signal);
  const removed = await deleteVolume(c, storagePool, volumeName(name), signal);
  // The seed too, whether or not this lifecycle writes seeds (the setting may have changed since).
  const seedRemoved = await deleteVolume(c, storagePool, seedVolumeName(name), signal);
  if (found || removed || seedRemoved) hlog.info({ domain: Boolean(found), volume: removed, seed: seedRemoved }, 'proxy instance deleted');
}
