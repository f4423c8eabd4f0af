/**
 * The steps of the KVM proxy lifecycle on one libvirt connection: find a domain and its tag,
 * make the volume (uploading the base image first when configured), define, start, describe,
 * delete. Every step is safe to repeat after a crash or a lost connection: it looks up what
 * exists before it makes anything.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { EgressError } from '../../errors.ts';
import type { Logger } from '../../logging.ts';
import {
  DomainState,
  LibvirtError,
  MetadataType,
  isLibvirtExists,
  isLibvirtInvalidState,
  isLibvirtNotFound,
  isLibvirtUnsupported,
  type DomainRef,
  type LibvirtConnection,
  type StoragePoolRef,
  type StorageVolRef,
} from '../../kvm/libvirt/index.ts';
import { ProvisioningError, type Instance, type InstanceState } from '../lifecycle.ts';
import { forwardOf } from './port-forward.ts';
import { EGRESS_METADATA_URI, baseVolumeXml, copyVolumeXml, overlayVolumeXml, parseTag, type DomainTag } from './domain-xml.ts';

/** How proxy volumes are made from the base image volume. */
export interface VolumeSource {
  /** Name of the base image volume in the host's pool. */
  baseImageVolume: string;
  /** Format of the base image (`qcow2`, `raw`); default qcow2. */
  baseImageFormat: string;
  /** A local image file uploaded as the base volume when the pool lacks it. */
  baseImageFile: string | undefined;
  /** `overlay` (default): qcow2 with the base as backing store; `copy`: a full clone. */
  cloneMode: 'overlay' | 'copy';
}

/** virErrorNumber VIR_ERR_INVALID_ARG (also how drivers refuse unknown flags). */
const INVALID_ARG = 8;

/** Read flags: current state (config for an inactive domain, live for a running one). */
const AFFECT_CURRENT = 0;

export function volumeName(instance: string): string {
  return `${instance}.qcow2`;
}

export function uuidString(uuid: Buffer): string {
  const h = uuid.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Undefined when the daemon says there is no such object; other errors propagate. */
export async function orUndefined<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (isLibvirtNotFound(err)) return undefined;
    throw err;
  }
}

export interface FoundDomain {
  dom: DomainRef;
  /** Undefined: the domain carries no tag of ours and must not be touched. */
  tag: DomainTag | undefined;
}

export async function findDomain(c: LibvirtConnection, name: string, signal: AbortSignal): Promise<FoundDomain | undefined> {
  const dom = await orUndefined(c.domainLookupByName(name, signal));
  if (!dom) return undefined;
  return { dom, tag: await readTag(c, dom, signal) };
}

/** Our tag on the domain; undefined when it has none (error 80) — or vanished meanwhile (42). */
export async function readTag(c: LibvirtConnection, dom: DomainRef, signal: AbortSignal): Promise<DomainTag | undefined> {
  const xml = await orUndefined(c.domainGetMetadata(dom, { type: MetadataType.ELEMENT, uri: EGRESS_METADATA_URI, flags: AFFECT_CURRENT }, signal));
  return xml === undefined ? undefined : parseTag(xml);
}

export function instanceState(state: number): InstanceState {
  switch (state) {
    case DomainState.RUNNING:
    case DomainState.BLOCKED:
    case DomainState.PAUSED:
      return 'running';
    case DomainState.SHUTDOWN:
      return 'stopping';
    case DomainState.SHUTOFF:
      return 'stopped';
    case DomainState.CRASHED:
      return 'failed';
    case DomainState.PMSUSPENDED:
      return 'stopped';
    default:
      return 'provisioning';
  }
}

/** Where the proxy listens: the first IPv4 (else IPv6) address from the DHCP lease, then ARP. */
export async function findEndpoint(
  c: LibvirtConnection,
  dom: DomainRef,
  port: number,
  signal: AbortSignal,
): Promise<{ host: string; port: number } | undefined> {
  for (const source of [0 /* lease */, 2 /* ARP */]) {
    let ifaces;
    try {
      ifaces = await c.domainInterfaceAddresses(dom, source, signal);
    } catch (err) {
      // No lease source for a user-mode NIC, no ARP entry yet, an older daemon: no address known.
      if (err instanceof LibvirtError) continue;
      throw err;
    }
    const addrs = ifaces.flatMap((i) => i.addrs);
    const pick = addrs.find((a) => a.type === 0) ?? addrs[0];
    if (pick) return { host: pick.addr, port };
  }
  return undefined;
}

export async function describe(
  c: LibvirtConnection,
  found: { dom: DomainRef; tag: DomainTag },
  placement: string,
  port: number | undefined,
  signal: AbortSignal,
  /** The domain is reached through a host port forward (port-forward.ts), not at its own address. */
  forwarded = false,
): Promise<Instance> {
  const { state, reason } = await c.domainGetState(found.dom, signal);
  const instance: Instance = {
    name: found.dom.name,
    id: uuidString(found.dom.uuid),
    state: instanceState(state),
    owner: { fleet: found.tag.fleet, proxy: found.tag.proxy },
    placement,
    createdAt: found.tag.createdAt,
  };
  if (state === DomainState.CRASHED) instance.message = `domain crashed (libvirt reason ${reason})`;
  if (port !== undefined && instance.state === 'running') {
    const endpoint = forwarded ? forwardOf(await c.domainGetXmlDesc(found.dom, 0, signal)) : await findEndpoint(c, found.dom, port, signal);
    if (endpoint) instance.endpoint = endpoint;
  }
  return instance;
}

/** The base image volume; uploaded from the local file first when it is missing and a file is configured. */
async function baseVolume(c: LibvirtConnection, pool: StoragePoolRef, src: VolumeSource, log: Logger, signal: AbortSignal): Promise<StorageVolRef> {
  const existing = await orUndefined(c.storageVolLookupByName(pool, src.baseImageVolume, signal));
  if (existing) return existing;
  if (!src.baseImageFile) {
    throw new ProvisioningError(`base image volume "${src.baseImageVolume}" not found in storage pool "${pool.name}" and no baseImageFile is configured`);
  }
  return uploadFileVolume(c, pool, src.baseImageVolume, src.baseImageFile, log, signal);
}

/**
 * A local file uploaded, bytes as they are, as a new volume of the pool (the base image, a kernel).
 * Another worker making the same volume makes this one a retry later (BaseImageBusyError), never a
 * second upload; a failed upload leaves no half-written volume behind.
 */
export async function uploadFileVolume(
  c: LibvirtConnection,
  pool: StoragePoolRef,
  name: string,
  file: string,
  log: Logger,
  signal: AbortSignal,
): Promise<StorageVolRef> {
  const size = (await stat(file)).size;
  let vol: StorageVolRef;
  try {
    vol = await c.storageVolCreateXml(pool, baseVolumeXml(name, size), 0, signal);
  } catch (err) {
    if (isLibvirtExists(err)) throw new BaseImageBusyError(name, err);
    throw err;
  }
  log.info({ volume: name, pool: pool.name, bytes: size }, 'uploading a file into a volume');
  try {
    await c.storageVolUpload(vol, createReadStream(file), { offset: 0, length: size }, signal);
  } catch (err) {
    await c.storageVolDelete(vol, 0, signal).catch(() => undefined);
    throw err;
  }
  // Let the pool re-probe the file so its format and sizes are what was uploaded.
  await c.storagePoolRefresh(pool, signal);
  return await c.storageVolLookupByName(pool, name, signal);
}

/** The proxy's volume: found again by name (a crashed create's leftover is reused), else made. */
export async function ensureVolume(
  c: LibvirtConnection,
  pool: StoragePoolRef,
  name: string,
  src: VolumeSource,
  log: Logger,
  signal: AbortSignal,
): Promise<{ vol: StorageVolRef; created: boolean }> {
  const existing = await orUndefined(c.storageVolLookupByName(pool, name, signal));
  if (existing) return { vol: existing, created: false };
  const base = await baseVolume(c, pool, src, log, signal);
  try {
    if (src.cloneMode === 'copy') {
      return { vol: await c.storageVolCreateXmlFrom(pool, copyVolumeXml(name), base, 0, signal), created: true };
    }
    const [info, path] = await Promise.all([c.storageVolGetInfo(base, signal), c.storageVolGetPath(base, signal)]);
    return { vol: await c.storageVolCreateXml(pool, overlayVolumeXml(name, info.capacity, path, src.baseImageFormat), 0, signal), created: true };
  } catch (err) {
    // A concurrent create of the same instance won the race: use its volume.
    if (isLibvirtExists(err)) return { vol: await c.storageVolLookupByName(pool, name, signal), created: false };
    throw err;
  }
}

/** Starts a defined domain; one already running is fine. */
export async function start(c: LibvirtConnection, dom: DomainRef, signal: AbortSignal): Promise<void> {
  try {
    await c.domainCreate(dom, 0, signal);
  } catch (err) {
    if (!isLibvirtInvalidState(err)) throw err;
  }
}

/** Destroy (not running is fine), undefine (with managed save, snapshot metadata and NVRAM), delete the volume. */
export async function removeDomain(c: LibvirtConnection, dom: DomainRef, signal: AbortSignal): Promise<void> {
  try {
    await c.domainDestroy(dom, 0, signal);
  } catch (err) {
    if (!isLibvirtInvalidState(err) && !isLibvirtNotFound(err)) throw err;
  }
  const UNDEFINE_MANAGED_SAVE = 1;
  const UNDEFINE_SNAPSHOTS_METADATA = 2;
  const UNDEFINE_NVRAM = 4;
  const undefine = async (flags: number): Promise<void> => {
    try {
      await c.domainUndefine(dom, flags, signal);
    } catch (err) {
      if (!isLibvirtNotFound(err)) throw err;
    }
  };
  try {
    await undefine(UNDEFINE_MANAGED_SAVE | UNDEFINE_SNAPSHOTS_METADATA | UNDEFINE_NVRAM);
  } catch (err) {
    // A driver that knows none of these extras (the test driver answers 8 "unsupported flags"): plain undefine.
    if (!(err instanceof LibvirtError && (err.libvirtCode === INVALID_ARG || isLibvirtUnsupported(err)))) throw err;
    await undefine(0);
  }
}

export async function deleteVolume(c: LibvirtConnection, pool: StoragePoolRef, name: string, signal: AbortSignal): Promise<boolean> {
  const vol = await orUndefined(c.storageVolLookupByName(pool, name, signal));
  if (!vol) return false;
  try {
    await c.storageVolDelete(vol, 0, signal);
  } catch (err) {
    if (!isLibvirtNotFound(err)) throw err;
  }
  return true;
}

/** Two workers are making the same base image volume; the loser retries once the upload is done. */
export class BaseImageBusyError extends EgressError {
  constructor(volume: string, cause: unknown) {
    super('ERR_KVM_BASE_IMAGE_BUSY', `base image volume "${volume}" is being created by another worker`, { cause, retryable: true });
  }
}
