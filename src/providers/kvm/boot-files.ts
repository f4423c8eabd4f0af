/**
 * Direct kernel boot's files on a host: the provider's `kernel.kernelFile` and `kernel.initrdFile`
 * are uploaded into each host's pool, like `baseImageFile`, as volumes named by their content
 * (`egress-boot-<sha256 prefix>-<file name>`): a changed file is a new volume, so a domain never boots
 * a half-replaced kernel, and every worker and host agrees on the name without talking.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { LibvirtConnection, StoragePoolRef } from '../../kvm/libvirt/index.ts';
import type { Logger } from '../../logging.ts';
import { orUndefined, uploadFileVolume } from './lifecycle-ops.ts';

export interface KernelFiles {
  kernelFile: string;
  initrdFile: string;
  cmdline: string;
}

/** The kernel's and initrd's paths on the host, for the domain's `<kernel>` and `<initrd>`. */
export interface KernelPaths {
  kernelPath: string;
  initrdPath: string;
  cmdline: string;
}

async function sha256Of(file: string, signal: AbortSignal): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { signal })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Volume names by file, remembered while the file's size and mtime stay the same. */
export function bootVolumeNamer(): (file: string, signal: AbortSignal) => Promise<string> {
  const known = new Map<string, { stamp: string; name: string }>();
  return async (file, signal) => {
    const s = await stat(file);
    const stamp = `${s.size}:${s.mtimeMs}`;
    const hit = known.get(file);
    if (hit?.stamp === stamp) return hit.name;
    const safe = basename(file).replace(/[^A-Za-z0-9._-]/g, '_');
    const name = `egress-boot-${(await sha256Of(file, signal)).slice(0, 16)}-${safe}`;
    known.set(file, { stamp, name });
    return name;
  };
}

/** Both files present in the pool (uploaded when missing); their paths on the host. */
export async function ensureKernelFiles(
  c: LibvirtConnection,
  pool: StoragePoolRef,
  files: KernelFiles,
  nameOf: (file: string, signal: AbortSignal) => Promise<string>,
  log: Logger,
  signal: AbortSignal,
): Promise<KernelPaths> {
  const pathOf = async (file: string): Promise<string> => {
    const name = await nameOf(file, signal);
    const vol = (await orUndefined(c.storageVolLookupByName(pool, name, signal))) ?? (await uploadFileVolume(c, pool, name, file, log, signal));
    return c.storageVolGetPath(vol, signal);
  };
  const kernelPath = await pathOf(files.kernelFile);
  const initrdPath = await pathOf(files.initrdFile);
  return { kernelPath, initrdPath, cmdline: files.cmdline };
}
