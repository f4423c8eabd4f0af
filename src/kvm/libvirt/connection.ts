/**
 * A libvirt remote-protocol connection over any Duplex (an ssh2 streamlocal channel, a unix
 * socket, an in-memory pair): typed procedure methods, each a thin wrapper over the table entry
 * and the one observed invoke path of LibvirtConnectionBase.
 */
import { MessageType, REMOTE_PROGRAM, Proc } from './constants.ts';
import { LibvirtConnectionBase } from './connection-base.ts';
import { lifecycleEventCodec, PROCEDURES } from './procedures.ts';
import type {
  DomainInfo,
  DomainInterface,
  DomainRef,
  DomainStateResult,
  LifecycleEvent,
  StoragePoolInfo,
  StoragePoolRef,
  StorageVolInfo,
  StorageVolRef,
  UploadResult,
  UploadSource,
} from './types.ts';
import { runUpload } from './upload.ts';
import { runDownload, type DownloadResult, type DownloadSink } from './download.ts';
import { decodeXdr, encodeXdr } from './xdr.ts';

export { DEFAULT_MAX_IN_FLIGHT, type LibvirtConnectionOptions } from './connection-base.ts';

export interface SetMetadataArgs {
  /** MetadataType: 0 description, 1 title, 2 element. */
  type: number;
  /** The XML element (type 2) or text; null removes it. */
  metadata: string | null;
  /** XML namespace prefix (type 2). */
  key: string | null;
  /** XML namespace URI (type 2). */
  uri: string | null;
  /** ModificationImpact: 1 live, 2 config. */
  flags: number;
}

export interface UploadOptions {
  /** Byte offset in the volume. Default 0. */
  offset?: number;
  /** Bytes to write (upload) or read (download); 0 (default) = until the stream / the volume ends. */
  length?: number;
  flags?: number;
}

export class LibvirtConnection extends LibvirtConnectionBase {
  // ---- connection ----
  authList(signal: AbortSignal): Promise<number[]> {
    return this.invoke(PROCEDURES.authList, undefined, signal);
  }
  /** Returns libvirt's `complete` flag (non-zero on success). */
  authPolkit(signal: AbortSignal): Promise<number> {
    return this.invoke(PROCEDURES.authPolkit, undefined, signal);
  }
  supportsFeature(feature: number, signal: AbortSignal): Promise<boolean> {
    return this.invoke(PROCEDURES.connectSupportsFeature, { feature }, signal);
  }
  connectOpen(uri: string | null, flags: number, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.connectOpen, { name: uri, flags }, signal);
  }
  getType(signal: AbortSignal): Promise<string> {
    return this.invoke(PROCEDURES.getType, undefined, signal);
  }
  /** Hypervisor version, major·10⁶ + minor·10³ + micro. */
  getVersion(signal: AbortSignal): Promise<number> {
    return this.invoke(PROCEDURES.getVersion, undefined, signal);
  }
  /** libvirt library version, major·10⁶ + minor·10³ + micro (9000000 = 9.0.0). */
  getLibVersion(signal: AbortSignal): Promise<number> {
    return this.invoke(PROCEDURES.getLibVersion, undefined, signal);
  }
  getHostname(signal: AbortSignal): Promise<string> {
    return this.invoke(PROCEDURES.getHostname, undefined, signal);
  }

  // ---- domains ----
  /** flags: 0 all, 1 active, 2 inactive, 4 persistent, 8 transient, 16 running, 64 shutoff. */
  async listAllDomains(flags: number, signal: AbortSignal): Promise<DomainRef[]> {
    return (await this.invoke(PROCEDURES.listAllDomains, { needResults: 1, flags }, signal)).domains;
  }
  domainLookupByName(name: string, signal: AbortSignal): Promise<DomainRef> {
    return this.invoke(PROCEDURES.domainLookupByName, { name }, signal);
  }
  /** `uuid` is the 16 raw bytes (DomainRef.uuid). */
  domainLookupByUuid(uuid: Buffer, signal: AbortSignal): Promise<DomainRef> {
    return this.invoke(PROCEDURES.domainLookupByUuid, { uuid }, signal);
  }
  domainIsActive(dom: DomainRef, signal: AbortSignal): Promise<boolean> {
    return this.invoke(PROCEDURES.domainIsActive, { dom }, signal);
  }
  /** SHUTDOWN_FLAGS (asks the guest); flags: ACPI 1, AGENT 2. Returns before the guest is off. */
  domainShutdown(dom: DomainRef, flags: number, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.domainShutdown, { dom, flags }, signal);
  }
  /** DEFINE_XML_FLAGS; flags: VALIDATE = 1. */
  domainDefineXml(xml: string, flags: number, signal: AbortSignal): Promise<DomainRef> {
    return this.invoke(PROCEDURES.domainDefineXml, { xml, flags }, signal);
  }
  /** CREATE_WITH_FLAGS (start); returns the domain with its id set. */
  domainCreate(dom: DomainRef, flags: number, signal: AbortSignal): Promise<DomainRef> {
    return this.invoke(PROCEDURES.domainCreate, { dom, flags }, signal);
  }
  domainGetState(dom: DomainRef, signal: AbortSignal): Promise<DomainStateResult> {
    return this.invoke(PROCEDURES.domainGetState, { dom, flags: 0 }, signal);
  }
  domainGetInfo(dom: DomainRef, signal: AbortSignal): Promise<DomainInfo> {
    return this.invoke(PROCEDURES.domainGetInfo, { dom }, signal);
  }
  /** DESTROY_FLAGS; flags: GRACEFUL = 1. */
  domainDestroy(dom: DomainRef, flags: number, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.domainDestroy, { dom, flags }, signal);
  }
  /** UNDEFINE_FLAGS; flags: MANAGED_SAVE 1, SNAPSHOTS_METADATA 2, NVRAM 4, … */
  domainUndefine(dom: DomainRef, flags: number, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.domainUndefine, { dom, flags }, signal);
  }
  domainGetXmlDesc(dom: DomainRef, flags: number, signal: AbortSignal): Promise<string> {
    return this.invoke(PROCEDURES.domainGetXmlDesc, { dom, flags }, signal);
  }
  domainSetMetadata(dom: DomainRef, args: SetMetadataArgs, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.domainSetMetadata, { dom, ...args }, signal);
  }
  /** Fails with kind 'not-found' (code 80) when the domain carries no such metadata. */
  domainGetMetadata(dom: DomainRef, args: { type: number; uri: string | null; flags: number }, signal: AbortSignal): Promise<string> {
    return this.invoke(PROCEDURES.domainGetMetadata, { dom, ...args }, signal);
  }
  /** source: 0 DHCP lease, 1 guest agent, 2 ARP. */
  domainInterfaceAddresses(dom: DomainRef, source: number, signal: AbortSignal): Promise<DomainInterface[]> {
    return this.invoke(PROCEDURES.domainInterfaceAddresses, { dom, source, flags: 0 }, signal);
  }
  domainEventRegisterAny(eventId: number, dom: DomainRef | null, signal: AbortSignal): Promise<number> {
    return this.invoke(PROCEDURES.domainEventRegisterAny, { eventId, dom }, signal);
  }
  domainEventDeregisterAny(callbackId: number, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.domainEventDeregisterAny, { callbackId }, signal);
  }
  /** Lifecycle events (MESSAGE 318) after domainEventRegisterAny(0, …); returns an unsubscribe function. */
  onDomainLifecycle(listener: (event: LifecycleEvent) => void): () => void {
    return this.core.onMessage(REMOTE_PROGRAM, Proc.DOMAIN_EVENT_CALLBACK_LIFECYCLE, (frame) => {
      if (frame.type !== MessageType.MESSAGE) return;
      try {
        listener(decodeXdr(frame.payload, lifecycleEventCodec.read));
      } catch (err) {
        this.logger.warn({ err }, 'undecodable libvirt lifecycle event dropped');
      }
    });
  }

  // ---- storage ----
  /** flags: 0 all, 1 inactive, 2 active, … (virConnectListAllStoragePoolsFlags). */
  async listAllStoragePools(flags: number, signal: AbortSignal): Promise<StoragePoolRef[]> {
    return (await this.invoke(PROCEDURES.listAllStoragePools, { needResults: 1, flags }, signal)).pools;
  }
  async storagePoolListAllVolumes(pool: StoragePoolRef, signal: AbortSignal): Promise<StorageVolRef[]> {
    return (await this.invoke(PROCEDURES.storagePoolListAllVolumes, { pool, needResults: 1, flags: 0 }, signal)).vols;
  }
  /** Starts an inactive (defined) pool. */
  storagePoolCreate(pool: StoragePoolRef, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.storagePoolCreate, { pool, flags: 0 }, signal);
  }
  storagePoolLookupByName(name: string, signal: AbortSignal): Promise<StoragePoolRef> {
    return this.invoke(PROCEDURES.storagePoolLookupByName, { name }, signal);
  }
  storagePoolGetInfo(pool: StoragePoolRef, signal: AbortSignal): Promise<StoragePoolInfo> {
    return this.invoke(PROCEDURES.storagePoolGetInfo, { pool }, signal);
  }
  storagePoolIsActive(pool: StoragePoolRef, signal: AbortSignal): Promise<boolean> {
    return this.invoke(PROCEDURES.storagePoolIsActive, { pool }, signal);
  }
  storagePoolRefresh(pool: StoragePoolRef, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.storagePoolRefresh, { pool, flags: 0 }, signal);
  }
  /** Creates and starts a transient pool. */
  storagePoolCreateXml(xml: string, flags: number, signal: AbortSignal): Promise<StoragePoolRef> {
    return this.invoke(PROCEDURES.storagePoolCreateXml, { xml, flags }, signal);
  }
  storagePoolDestroy(pool: StoragePoolRef, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.storagePoolDestroy, { pool }, signal);
  }
  storageVolCreateXml(pool: StoragePoolRef, xml: string, flags: number, signal: AbortSignal): Promise<StorageVolRef> {
    return this.invoke(PROCEDURES.storageVolCreateXml, { pool, xml, flags }, signal);
  }
  storageVolCreateXmlFrom(pool: StoragePoolRef, xml: string, clonevol: StorageVolRef, flags: number, signal: AbortSignal): Promise<StorageVolRef> {
    return this.invoke(PROCEDURES.storageVolCreateXmlFrom, { pool, xml, clonevol, flags }, signal);
  }
  storageVolLookupByName(pool: StoragePoolRef, name: string, signal: AbortSignal): Promise<StorageVolRef> {
    return this.invoke(PROCEDURES.storageVolLookupByName, { pool, name }, signal);
  }
  storageVolGetInfo(vol: StorageVolRef, signal: AbortSignal): Promise<StorageVolInfo> {
    return this.invoke(PROCEDURES.storageVolGetInfo, { vol }, signal);
  }
  storageVolGetPath(vol: StorageVolRef, signal: AbortSignal): Promise<string> {
    return this.invoke(PROCEDURES.storageVolGetPath, { vol }, signal);
  }
  /** capacity in bytes; flags: ALLOCATE 1, DELTA 2, SHRINK 4. */
  storageVolResize(vol: StorageVolRef, capacity: number, flags: number, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.storageVolResize, { vol, capacity, flags }, signal);
  }
  storageVolDelete(vol: StorageVolRef, flags: number, signal: AbortSignal): Promise<void> {
    return this.invoke(PROCEDURES.storageVolDelete, { vol, flags }, signal);
  }
  /**
   * Streams `source` into the volume and resolves once the daemon confirmed the data. A STREAM
   * error from the daemon rejects with its LibvirtError; an abort tells the daemon and rejects.
   */
  storageVolUpload(vol: StorageVolRef, source: UploadSource, options: UploadOptions, signal: AbortSignal): Promise<UploadResult> {
    const def = PROCEDURES.storageVolUpload;
    const args = { vol, offset: options.offset ?? 0, length: options.length ?? 0, flags: options.flags ?? 0 };
    return this.observe(def, (trace) => {
      const payload = encodeXdr(args, def.args.write);
      return runUpload(this.core, def.proc, def.name, payload, source, signal, { trace, authenticated: this.isAuthed });
    });
  }
  /**
   * Streams the volume's bytes to `sink` in order and resolves once the daemon confirmed the end.
   * While a promise returned by `sink` is pending the connection stops reading (see download.ts).
   */
  storageVolDownload(vol: StorageVolRef, sink: DownloadSink, options: UploadOptions, signal: AbortSignal): Promise<DownloadResult> {
    const def = PROCEDURES.storageVolDownload;
    const args = { vol, offset: options.offset ?? 0, length: options.length ?? 0, flags: options.flags ?? 0 };
    return this.observe(def, (trace) => {
      const payload = encodeXdr(args, def.args.write);
      return runDownload(this.core, def.proc, def.name, payload, sink, signal, { trace, authenticated: this.isAuthed });
    });
  }
}
