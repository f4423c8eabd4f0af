/**
 * Public shapes of libvirt objects and procedure results.
 *
 * Hyper values travel as bigint in the codec. Results expose `number` where the value always
 * fits below 2^53 in practice (bytes, KiB, versions); the conversion throws an XdrError rather
 * than silently losing precision. CPU time stays bigint.
 */

/** `remote_nonnull_domain`. `id` is −1 when the domain is not running. */
export interface DomainRef {
  name: string;
  /** 16 raw bytes. */
  uuid: Buffer;
  id: number;
}

/** `remote_nonnull_storage_pool`. */
export interface StoragePoolRef {
  name: string;
  uuid: Buffer;
}

/** `remote_nonnull_storage_vol`. For dir pools `key` is the file path. */
export interface StorageVolRef {
  pool: string;
  name: string;
  key: string;
}

/** `remote_nonnull_network`. */
export interface NetworkRef {
  name: string;
  uuid: Buffer;
}

export interface DomainStateResult {
  /** virDomainState (DomainState in constants). */
  state: number;
  /** Reason within that state (e.g. running/booted = 1, shutoff/destroyed = 2). */
  reason: number;
}

export interface DomainInfo {
  state: number;
  /** KiB. */
  maxMemKiB: number;
  /** KiB. */
  memoryKiB: number;
  nrVirtCpu: number;
  /** Nanoseconds, as bigint: the test driver reports wall-clock time here (beyond 2^53). */
  cpuTimeNs: bigint;
}

export type StoragePoolStateWord = 'inactive' | 'building' | 'running' | 'degraded' | 'inaccessible' | 'unknown';

export interface StoragePoolInfo {
  /** virStoragePoolState (StoragePoolState in constants). */
  state: number;
  /** The state as `virsh pool-info` words it. */
  stateWord: StoragePoolStateWord;
  /** Bytes. */
  capacity: number;
  /** Bytes. */
  allocation: number;
  /** Bytes. */
  available: number;
}

export interface StorageVolInfo {
  /** virStorageVolType: 0 file, 1 block, 2 dir, 3 network, 4 netdir, 5 ploop. */
  type: number;
  /** Bytes. */
  capacity: number;
  /** Bytes. */
  allocation: number;
}

export interface DomainIpAddress {
  /** 0 IPv4, 1 IPv6. */
  type: number;
  addr: string;
  prefix: number;
}

export interface DomainInterface {
  name: string;
  hwaddr: string | null;
  addrs: DomainIpAddress[];
}

export interface ListAllDomainsResult {
  domains: DomainRef[];
  ret: number;
}

export interface LifecycleEvent {
  callbackId: number;
  dom: DomainRef;
  /** virDomainEventType: 0 defined, 1 undefined, 2 started, … 5 stopped. */
  event: number;
  detail: number;
}

/** What an upload sends: a Node Readable or any async iterable of byte chunks. */
export type UploadSource = AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export interface UploadResult {
  /** Bytes sent in STREAM data packets. */
  bytes: number;
}
