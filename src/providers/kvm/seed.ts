/**
 * The proxy's cloud-init NoCloud seed on a KVM host: a raw volume `<instance>.seed.iso` in the
 * host's pool beside the proxy's overlay, holding the ISO 9660 image (label CIDATA) with the
 * user-data that installs and starts the proxy on a stock Debian 12 image (src/providers/boot/), and
 * attached read-only to the domain. It goes with the domain; one left by a crashed create is
 * found by name (rewritten by the next ensure, removed by a delete).
 *
 * The image bytes are a function of the proxy's spec and the provider's policy alone, so writing
 * them again (a retried ensure, two workers ensuring at once) writes the same bytes.
 */
import { renderMetaData, renderUserData } from '../boot/cloud-init.ts';
import { nocloudSeed } from '../boot/nocloud-seed.ts';
import { bootPrograms } from '../boot/programs.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  isLibvirtExists,
  isLibvirtInvalidState,
  isLibvirtNotFound,
  type LibvirtConnection,
  type StoragePoolRef,
  type StorageVolRef,
} from '../../kvm/libvirt/index.ts';
import type { InstanceSpec } from '../lifecycle.ts';
import { escapeXml } from './domain-xml.ts';
import { orUndefined } from './lifecycle-ops.ts';

export function seedVolumeName(instance: string): string {
  return `${instance}.seed.iso`;
}

export function seedVolumeXml(name: string, bytes: number): string {
  return `<volume><name>${escapeXml(name)}</name><capacity unit='bytes'>${bytes}</capacity><target><format type='raw'/></target></volume>`;
}

/** The seed image for one proxy (secret: it holds the password). `policy` is the provider's document as JSON. */
export async function seedImage(spec: InstanceSpec, port: number, policy: string): Promise<Buffer> {
  const userData = renderUserData({ credentials: spec.credentials, port, policy: { kind: 'file', document: policy }, programs: await bootPrograms() });
  return nocloudSeed(userData, renderMetaData(spec.name, spec.name));
}

/**
 * Makes (or rewrites) the seed volume with `image`. A half-written volume is removed, never left for a
 * boot; one libvirt holds for another operation is waited for, never removed.
 */
export async function writeSeed(c: LibvirtConnection, pool: StoragePoolRef, name: string, image: Buffer, signal: AbortSignal): Promise<void> {
  let vol: StorageVolRef | undefined = await orUndefined(c.storageVolLookupByName(pool, name, signal));
  if (vol && (await c.storageVolGetInfo(vol, signal)).capacity !== image.length) {
    // Made by another release (another program size): replaced, not patched.
    await deleteSeedVolume(c, vol, signal);
    vol = undefined;
  }
  if (!vol) {
    try {
      vol = await c.storageVolCreateXml(pool, seedVolumeXml(name, image.length), 0, signal);
    } catch (err) {
      // A concurrent ensure of the same instance made it first: write the same bytes into it.
      if (!isLibvirtExists(err)) throw err;
      vol = await c.storageVolLookupByName(pool, name, signal);
    }
  }
  for (let attempt = 1; ; attempt++) {
    try {
      await c.storageVolUpload(vol, [image], { offset: 0, length: image.length }, signal);
      return;
    } catch (err) {
      if (isLibvirtInvalidState(err)) {
        // "volume … is still in use": libvirt holds it for another operation (a concurrent ensure of this
        // instance writing the same bytes, a clone reading it). Nothing was written, and the volume is not ours
        // to delete while another uses it: wait for it, then write.
        if (attempt >= IN_USE_ATTEMPTS) throw err;
        await sleep(IN_USE_PAUSE_MS * attempt, undefined, { signal });
        continue;
      }
      await deleteSeedVolume(c, vol, signal).catch(() => undefined);
      throw err;
    }
  }
}

/** How often, and how patiently, a seed upload refused because the volume is in use is tried again (about 5 s in all). */
const IN_USE_ATTEMPTS = 10;
const IN_USE_PAUSE_MS = 100;

async function deleteSeedVolume(c: LibvirtConnection, vol: StorageVolRef, signal: AbortSignal): Promise<void> {
  try {
    await c.storageVolDelete(vol, 0, signal);
  } catch (err) {
    if (!isLibvirtNotFound(err)) throw err;
  }
}
