/** Public surface of the libvirt remote-protocol client. */
export { LibvirtConnection, DEFAULT_MAX_IN_FLIGHT } from './connection.ts';
export type { LibvirtConnectionOptions, SetMetadataArgs, UploadOptions } from './connection.ts';
export { openLibvirtConnection } from './open.ts';
export type { OpenLibvirtOptions } from './open.ts';
export type { KeepaliveOptions } from './keepalive.ts';
export type { DownloadSink, DownloadResult } from './download.ts';
export type { RpcStats } from './rpc-types.ts';
export { DEFAULT_KEEPALIVE } from './keepalive.ts';
export { DEFAULT_MAX_QUEUED_BYTES } from './write-queue.ts';
export {
  LibvirtError,
  LibvirtAuthError,
  LibvirtAbortError,
  LibvirtProtocolError,
  ConnectionLostError,
  ConnectionClosedError,
  KeepaliveTimeoutError,
  StreamEndedError,
  PeerNotReadingError,
  classifyLibvirtError,
  libvirtErrorKind,
  isLibvirtNotFound,
  isLibvirtExists,
  isLibvirtInvalidState,
  isLibvirtAuthError,
  isLibvirtAccessDenied,
  isLibvirtUnsupported,
} from './errors.ts';
export type { LibvirtErrorKind, RemoteError } from './errors.ts';
export { XdrError } from './xdr.ts';
export { createLibvirtMetrics, RPC_DURATION_METRIC } from './metrics.ts';
export type { LibvirtMetrics, RpcOutcome } from './metrics.ts';
export { poolStateWord } from './procedures.ts';
export { DomainState, StoragePoolState, MetadataType, ModificationImpact, ErrorCode, ErrorDomain } from './constants.ts';
export type {
  DomainRef,
  StoragePoolRef,
  StorageVolRef,
  DomainStateResult,
  DomainInfo,
  StoragePoolInfo,
  StoragePoolStateWord,
  StorageVolInfo,
  DomainInterface,
  DomainIpAddress,
  LifecycleEvent,
  UploadSource,
  UploadResult,
} from './types.ts';
