/**
 * The procedure table: one entry per REMOTE_PROGRAM procedure this client speaks, with its
 * number, its argument codec and its result codec. The connection has a single invoke path
 * over this table (logging, metrics, error classification), and the test fake decodes the same
 * entries in the other direction.
 */
import {
  UUID_BYTES,
  domainRefCodec,
  intCodec,
  optStringCodec,
  poolRefCodec,
  stringCodec,
  struct,
  uhyperNumber,
  uintCodec,
  voidCodec,
  volRefCodec,
  type Codec,
} from './codecs.ts';
import { Limits, Proc, STRING_MAX } from './constants.ts';
import type {
  DomainInfo,
  DomainInterface,
  DomainRef,
  DomainStateResult,
  LifecycleEvent,
  ListAllDomainsResult,
  StoragePoolInfo,
  StoragePoolStateWord,
  StoragePoolRef,
  StorageVolInfo,
  StorageVolRef,
} from './types.ts';

export interface ProcedureDef<A, R> {
  /** Lower-case libvirt name without REMOTE_PROC_, used in logs and the `procedure` metric label. */
  readonly name: string;
  readonly proc: number;
  readonly args: Codec<A>;
  readonly ret: Codec<R>;
  /** Set for procedures whose REPLY opens a data stream on the same serial. */
  readonly stream?: 'upload' | 'download';
}

function def<A, R>(name: string, proc: number, args: Codec<A>, ret: Codec<R>, stream?: 'upload' | 'download'): ProcedureDef<A, R> {
  return stream ? { name, proc, args, ret, stream } : { name, proc, args, ret };
}

const intBool: Codec<boolean> = { write: (w, v) => void w.int(v ? 1 : 0), read: (r) => r.int() !== 0 };
const flags = uintCodec;

const POOL_WORDS: readonly StoragePoolStateWord[] = ['inactive', 'building', 'running', 'degraded', 'inaccessible'];
/** A virStoragePoolState as `virsh pool-info` words it. */
export function poolStateWord(state: number): StoragePoolStateWord {
  return POOL_WORDS[state] ?? 'unknown';
}

const domainInfoCodec: Codec<DomainInfo> = struct<DomainInfo>({
  state: uintCodec, // unsigned char: 4 bytes on the wire
  maxMemKiB: uhyperNumber('maxMem'),
  memoryKiB: uhyperNumber('memory'),
  nrVirtCpu: uintCodec, // unsigned short: 4 bytes on the wire
  cpuTimeNs: { write: (w, v) => void w.uhyper(v), read: (r) => r.uhyper() },
});

const poolInfoCodec: Codec<StoragePoolInfo> = {
  write(w, v) {
    w.uint(v.state);
    for (const n of [v.capacity, v.allocation, v.available]) w.uhyper(BigInt(n));
  },
  read(r) {
    const state = r.uint();
    const capacity = uhyperNumber('capacity').read(r);
    const allocation = uhyperNumber('allocation').read(r);
    const available = uhyperNumber('available').read(r);
    return { state, stateWord: poolStateWord(state), capacity, allocation, available };
  },
};

const volInfoCodec: Codec<StorageVolInfo> = struct<StorageVolInfo>({
  type: intCodec, // char: 4 bytes on the wire
  capacity: uhyperNumber('capacity'),
  allocation: uhyperNumber('allocation'),
});

const interfacesCodec: Codec<DomainInterface[]> = {
  write(w, list) {
    w.array(list, Limits.DOMAIN_INTERFACE_MAX, (ww, i) => {
      ww.string(i.name, STRING_MAX);
      optStringCodec.write(ww, i.hwaddr);
      ww.array(i.addrs, Limits.DOMAIN_IP_ADDR_MAX, (w3, a) => void w3.int(a.type).string(a.addr, STRING_MAX).uint(a.prefix));
    });
  },
  read: (r) =>
    r.array(Limits.DOMAIN_INTERFACE_MAX, (rr) => ({
      name: rr.string(STRING_MAX),
      hwaddr: optStringCodec.read(rr),
      addrs: rr.array(Limits.DOMAIN_IP_ADDR_MAX, (r3) => ({ type: r3.int(), addr: r3.string(STRING_MAX), prefix: r3.uint() })),
    })),
};

const listAllDomainsCodec: Codec<ListAllDomainsResult> = {
  write: (w, v) => void w.array(v.domains, Limits.DOMAIN_LIST_MAX, domainRefCodec.write).uint(v.ret),
  read: (r) => ({ domains: r.array(Limits.DOMAIN_LIST_MAX, domainRefCodec.read), ret: r.uint() }),
};

const listAllPoolsCodec: Codec<{ pools: StoragePoolRef[]; ret: number }> = {
  write: (w, v) => void w.array(v.pools, Limits.STORAGE_POOL_LIST_MAX, poolRefCodec.write).uint(v.ret),
  read: (r) => ({ pools: r.array(Limits.STORAGE_POOL_LIST_MAX, poolRefCodec.read), ret: r.uint() }),
};

const listAllVolsCodec: Codec<{ vols: StorageVolRef[]; ret: number }> = {
  write: (w, v) => void w.array(v.vols, Limits.STORAGE_VOL_LIST_MAX, volRefCodec.write).uint(v.ret),
  read: (r) => ({ vols: r.array(Limits.STORAGE_VOL_LIST_MAX, volRefCodec.read), ret: r.uint() }),
};

const uuidCodec: Codec<Buffer> = { write: (w, v) => void w.fixedOpaque(v, UUID_BYTES), read: (r) => r.fixedOpaque(UUID_BYTES) };

const optDomainCodec: Codec<DomainRef | null> = {
  write: (w, v) => void w.optional(v, domainRefCodec.write),
  read: (r) => r.optional(domainRefCodec.read),
};

/** Payload of the DOMAIN_EVENT_CALLBACK_LIFECYCLE message (318). */
export const lifecycleEventCodec: Codec<LifecycleEvent> = struct<LifecycleEvent>({
  callbackId: intCodec,
  dom: domainRefCodec,
  event: intCodec,
  detail: intCodec,
});

const authListCodec: Codec<number[]> = {
  write: (w, v) => void w.array(v, Limits.AUTH_TYPE_LIST_MAX, (ww, t) => ww.int(t)),
  read: (r) => r.array(Limits.AUTH_TYPE_LIST_MAX, (rr) => rr.int()),
};

const dom = domainRefCodec;
const pool = poolRefCodec;
const vol = volRefCodec;
const volRange = struct({ vol, offset: uhyperNumber('offset'), length: uhyperNumber('length'), flags });

/** Every procedure of the client, keyed by method-style name. */
export const PROCEDURES = {
  authList: def('auth_list', Proc.AUTH_LIST, voidCodec, authListCodec),
  authPolkit: def('auth_polkit', Proc.AUTH_POLKIT, voidCodec, intCodec),
  connectSupportsFeature: def('connect_supports_feature', Proc.CONNECT_SUPPORTS_FEATURE, struct({ feature: intCodec }), intBool),
  connectOpen: def('connect_open', Proc.CONNECT_OPEN, struct({ name: optStringCodec, flags }), voidCodec),
  connectClose: def('connect_close', Proc.CONNECT_CLOSE, voidCodec, voidCodec),
  getType: def('connect_get_type', Proc.CONNECT_GET_TYPE, voidCodec, stringCodec),
  getVersion: def('connect_get_version', Proc.CONNECT_GET_VERSION, voidCodec, uhyperNumber('version')),
  getLibVersion: def('connect_get_lib_version', Proc.CONNECT_GET_LIB_VERSION, voidCodec, uhyperNumber('lib_version')),
  getHostname: def('connect_get_hostname', Proc.CONNECT_GET_HOSTNAME, voidCodec, stringCodec),
  listAllDomains: def('connect_list_all_domains', Proc.CONNECT_LIST_ALL_DOMAINS, struct({ needResults: intCodec, flags }), listAllDomainsCodec),
  domainLookupByName: def('domain_lookup_by_name', Proc.DOMAIN_LOOKUP_BY_NAME, struct({ name: stringCodec }), dom),
  domainLookupByUuid: def('domain_lookup_by_uuid', Proc.DOMAIN_LOOKUP_BY_UUID, struct({ uuid: uuidCodec }), dom),
  domainIsActive: def('domain_is_active', Proc.DOMAIN_IS_ACTIVE, struct({ dom }), intBool),
  domainShutdown: def('domain_shutdown_flags', Proc.DOMAIN_SHUTDOWN_FLAGS, struct({ dom, flags }), voidCodec),
  domainDefineXml: def('domain_define_xml_flags', Proc.DOMAIN_DEFINE_XML_FLAGS, struct({ xml: stringCodec, flags }), dom),
  domainCreate: def('domain_create_with_flags', Proc.DOMAIN_CREATE_WITH_FLAGS, struct({ dom, flags }), dom),
  domainGetState: def('domain_get_state', Proc.DOMAIN_GET_STATE, struct({ dom, flags }), struct<DomainStateResult>({ state: intCodec, reason: intCodec })),
  domainGetInfo: def('domain_get_info', Proc.DOMAIN_GET_INFO, struct({ dom }), domainInfoCodec),
  domainDestroy: def('domain_destroy_flags', Proc.DOMAIN_DESTROY_FLAGS, struct({ dom, flags }), voidCodec),
  domainUndefine: def('domain_undefine_flags', Proc.DOMAIN_UNDEFINE_FLAGS, struct({ dom, flags }), voidCodec),
  domainGetXmlDesc: def('domain_get_xml_desc', Proc.DOMAIN_GET_XML_DESC, struct({ dom, flags }), stringCodec),
  domainSetMetadata: def(
    'domain_set_metadata',
    Proc.DOMAIN_SET_METADATA,
    struct({ dom, type: intCodec, metadata: optStringCodec, key: optStringCodec, uri: optStringCodec, flags }),
    voidCodec,
  ),
  domainGetMetadata: def('domain_get_metadata', Proc.DOMAIN_GET_METADATA, struct({ dom, type: intCodec, uri: optStringCodec, flags }), stringCodec),
  domainInterfaceAddresses: def('domain_interface_addresses', Proc.DOMAIN_INTERFACE_ADDRESSES, struct({ dom, source: uintCodec, flags }), interfacesCodec),
  listAllStoragePools: def('connect_list_all_storage_pools', Proc.CONNECT_LIST_ALL_STORAGE_POOLS, struct({ needResults: intCodec, flags }), listAllPoolsCodec),
  storagePoolListAllVolumes: def(
    'storage_pool_list_all_volumes',
    Proc.STORAGE_POOL_LIST_ALL_VOLUMES,
    struct({ pool, needResults: intCodec, flags }),
    listAllVolsCodec,
  ),
  storagePoolCreate: def('storage_pool_create', Proc.STORAGE_POOL_CREATE, struct({ pool, flags }), voidCodec),
  storagePoolLookupByName: def('storage_pool_lookup_by_name', Proc.STORAGE_POOL_LOOKUP_BY_NAME, struct({ name: stringCodec }), pool),
  storagePoolGetInfo: def('storage_pool_get_info', Proc.STORAGE_POOL_GET_INFO, struct({ pool }), poolInfoCodec),
  storagePoolIsActive: def('storage_pool_is_active', Proc.STORAGE_POOL_IS_ACTIVE, struct({ pool }), intBool),
  storagePoolRefresh: def('storage_pool_refresh', Proc.STORAGE_POOL_REFRESH, struct({ pool, flags }), voidCodec),
  storagePoolCreateXml: def('storage_pool_create_xml', Proc.STORAGE_POOL_CREATE_XML, struct({ xml: stringCodec, flags }), pool),
  storagePoolDestroy: def('storage_pool_destroy', Proc.STORAGE_POOL_DESTROY, struct({ pool }), voidCodec),
  storageVolCreateXml: def('storage_vol_create_xml', Proc.STORAGE_VOL_CREATE_XML, struct({ pool, xml: stringCodec, flags }), vol),
  storageVolCreateXmlFrom: def('storage_vol_create_xml_from', Proc.STORAGE_VOL_CREATE_XML_FROM, struct({ pool, xml: stringCodec, clonevol: vol, flags }), vol),
  storageVolLookupByName: def('storage_vol_lookup_by_name', Proc.STORAGE_VOL_LOOKUP_BY_NAME, struct({ pool, name: stringCodec }), vol),
  storageVolGetInfo: def('storage_vol_get_info', Proc.STORAGE_VOL_GET_INFO, struct({ vol }), volInfoCodec),
  storageVolGetPath: def('storage_vol_get_path', Proc.STORAGE_VOL_GET_PATH, struct({ vol }), stringCodec),
  storageVolResize: def('storage_vol_resize', Proc.STORAGE_VOL_RESIZE, struct({ vol, capacity: uhyperNumber('capacity'), flags }), voidCodec),
  storageVolDelete: def('storage_vol_delete', Proc.STORAGE_VOL_DELETE, struct({ vol, flags }), voidCodec),
  storageVolUpload: def('storage_vol_upload', Proc.STORAGE_VOL_UPLOAD, volRange, voidCodec, 'upload'),
  storageVolDownload: def('storage_vol_download', Proc.STORAGE_VOL_DOWNLOAD, volRange, voidCodec, 'download'),
  domainEventRegisterAny: def(
    'connect_domain_event_callback_register_any',
    Proc.CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY,
    struct({ eventId: intCodec, dom: optDomainCodec }),
    intCodec,
  ),
  domainEventDeregisterAny: def(
    'connect_domain_event_callback_deregister_any',
    Proc.CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY,
    struct({ callbackId: intCodec }),
    voidCodec,
  ),
} as const;

export type ProcedureTable = typeof PROCEDURES;
export type ProcedureKey = keyof ProcedureTable;
export type ArgsOf<K extends ProcedureKey> = ProcedureTable[K] extends ProcedureDef<infer A, infer _R> ? A : never;
export type ResultOf<K extends ProcedureKey> = ProcedureTable[K] extends ProcedureDef<infer _A, infer R> ? R : never;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- heterogeneous table
type AnyProcedure = ProcedureDef<any, any>;
const BY_NUMBER = new Map<number, AnyProcedure>(Object.values(PROCEDURES).map((d: AnyProcedure) => [d.proc, d]));

/** The table entry for a procedure number, if this client knows it. */
export function procedureByNumber(proc: number): AnyProcedure | undefined {
  return BY_NUMBER.get(proc);
}
