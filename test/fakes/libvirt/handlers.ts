/**
 * Procedure semantics of the fake daemon, keyed by procedure number. Arguments arrive decoded
 * with the client's own codecs (procedures.ts, read direction); results are encoded with them.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
import type { Codec } from '../../../src/kvm/libvirt/codecs.ts';
import { ErrorCode, ErrorDomain, Proc } from '../../../src/kvm/libvirt/constants.ts';
import { procedureByNumber } from '../../../src/kvm/libvirt/procedures.ts';
import type { DomainRef, StoragePoolRef, StorageVolRef } from '../../../src/kvm/libvirt/types.ts';
import { fault, type FakeDomain, type FakeLibvirtState, type FakePool, type FakeVolume } from './model.ts';

export interface HandlerContext {
  state: FakeLibvirtState;
  serial: number;
  hostname: string;
  /** Opens an upload stream on this serial after the REPLY. */
  startUpload(vol: FakeVolume, offset: number, length: number): void;
  /** Starts sending a download stream on this serial after the REPLY. */
  startDownload(vol: FakeVolume, offset: number, length: number): void;
  registerEvents(): number;
  deregisterEvents(id: number): void;
  /** CONNECT_CLOSE: close after the reply. */
  closeAfterReply(): void;
  startServerPings(): void;
  open(uri: string | null): void;
}

export interface FakeProcedure {
  name: string;
  args: Codec<any>;
  ret: Codec<any>;
  handle(ctx: HandlerContext, args: any): unknown;
}

const domRef = (d: FakeDomain): DomainRef => ({ name: d.name, uuid: d.uuid, id: d.id });
const poolRef = (p: FakePool): StoragePoolRef => ({ name: p.name, uuid: p.uuid });
const volRef = (v: FakeVolume): StorageVolRef => ({ pool: v.pool, name: v.name, key: v.key });

function volumeOf(ctx: HandlerContext, ref: StorageVolRef): FakeVolume {
  return ctx.state.volume(ref.pool, ref.name);
}

const HANDLERS: Record<number, (ctx: HandlerContext, a: any) => unknown> = {
  [Proc.CONNECT_OPEN]: (ctx, a) => ctx.open(a.name),
  [Proc.CONNECT_CLOSE]: (ctx) => ctx.closeAfterReply(),
  [Proc.CONNECT_SUPPORTS_FEATURE]: (ctx, a) => {
    if (a.feature === 10) ctx.startServerPings();
    return a.feature === 10 || a.feature === 9;
  },
  [Proc.CONNECT_GET_TYPE]: (ctx) => (ctx.state.driver === 'test' ? 'TEST' : 'QEMU'),
  [Proc.CONNECT_GET_VERSION]: (ctx) => (ctx.state.driver === 'test' ? 2 : 7_002_000),
  [Proc.CONNECT_GET_LIB_VERSION]: () => 9_000_000,
  [Proc.CONNECT_GET_HOSTNAME]: (ctx) => ctx.hostname,
  [Proc.CONNECT_LIST_ALL_DOMAINS]: (ctx, a) => {
    const want = (d: FakeDomain): boolean => {
      const active = d.state === 1 || d.state === 3;
      if (a.flags & 1 && !active) return false;
      if (a.flags & 2 && active) return false;
      if (a.flags & 16 && d.state !== 1) return false;
      if (a.flags & 64 && d.state !== 5) return false;
      return true;
    };
    const domains = [...ctx.state.domains.values()].filter(want).map(domRef);
    return { domains: a.needResults ? domains : [], ret: domains.length };
  },
  [Proc.DOMAIN_LOOKUP_BY_NAME]: (ctx, a) => domRef(ctx.state.domain(a.name)),
  [Proc.DOMAIN_LOOKUP_BY_UUID]: (ctx, a) => domRef(ctx.state.domainByUuid(a.uuid)),
  [Proc.DOMAIN_IS_ACTIVE]: (ctx, a) => [1, 3].includes(ctx.state.domain(a.dom.name).state),
  [Proc.DOMAIN_SHUTDOWN_FLAGS]: (ctx, a) => ctx.state.shutdown(a.dom.name),
  [Proc.DOMAIN_DEFINE_XML_FLAGS]: (ctx, a) => domRef(ctx.state.define(a.xml)),
  [Proc.DOMAIN_CREATE_WITH_FLAGS]: (ctx, a) => domRef(ctx.state.start(a.dom.name)),
  [Proc.DOMAIN_GET_STATE]: (ctx, a) => {
    const d = ctx.state.domain(a.dom.name);
    return { state: d.state, reason: d.reason };
  },
  [Proc.DOMAIN_GET_INFO]: (ctx, a) => {
    const d = ctx.state.domain(a.dom.name);
    return { state: d.state, maxMemKiB: d.memoryKiB, memoryKiB: d.memoryKiB, nrVirtCpu: d.vcpus, cpuTimeNs: d.state === 1 ? 1_000_000n : 0n };
  },
  [Proc.DOMAIN_DESTROY_FLAGS]: (ctx, a) => ctx.state.destroy(a.dom.name),
  [Proc.DOMAIN_UNDEFINE_FLAGS]: (ctx, a) => ctx.state.undefine(a.dom.name),
  [Proc.DOMAIN_GET_XML_DESC]: (ctx, a) => ctx.state.domain(a.dom.name).xml,
  [Proc.DOMAIN_SET_METADATA]: (ctx, a) => ctx.state.setMetadata(a.dom.name, a.type, a.metadata, a.key, a.uri),
  [Proc.DOMAIN_GET_METADATA]: (ctx, a) => ctx.state.getMetadata(a.dom.name, a.type, a.uri),
  [Proc.DOMAIN_INTERFACE_ADDRESSES]: (ctx, a) => {
    const d = ctx.state.domain(a.dom.name);
    if (d.state !== 1) throw fault(ErrorCode.OPERATION_INVALID, ErrorDomain.DOMAIN, 'Requested operation is not valid: domain is not running');
    const n = (d.id % 200) + 10;
    return [{ name: 'vnet0', hwaddr: `52:54:00:00:00:${n.toString(16).padStart(2, '0')}`, addrs: [{ type: 0, addr: `192.168.122.${n}`, prefix: 24 }] }];
  },
  [Proc.CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY]: (ctx) => ctx.registerEvents(),
  [Proc.CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY]: (ctx, a) => ctx.deregisterEvents(a.callbackId),
  [Proc.CONNECT_LIST_ALL_STORAGE_POOLS]: (ctx, a) => {
    const pools = [...ctx.state.pools.values()].filter((p) => !(a.flags & 1 && p.state === 2) && !(a.flags & 2 && p.state !== 2)).map(poolRef);
    return { pools: a.needResults ? pools : [], ret: pools.length };
  },
  [Proc.STORAGE_POOL_LIST_ALL_VOLUMES]: (ctx, a) => {
    const vols = [...ctx.state.activePool(a.pool.name).volumes.values()].map(volRef);
    return { vols: a.needResults ? vols : [], ret: vols.length };
  },
  [Proc.STORAGE_POOL_CREATE]: (ctx, a) => ctx.state.startPool(a.pool.name),
  [Proc.STORAGE_POOL_LOOKUP_BY_NAME]: (ctx, a) => poolRef(ctx.state.pool(a.name)),
  [Proc.STORAGE_POOL_GET_INFO]: (ctx, a) => {
    const p = ctx.state.pool(a.pool.name);
    const active = p.state === 2;
    const allocation = active ? ctx.state.usedBytes(p) : 0;
    return { state: p.state, capacity: active ? p.capacity : 0, allocation, available: active ? p.capacity - allocation : 0 };
  },
  [Proc.STORAGE_POOL_IS_ACTIVE]: (ctx, a) => ctx.state.pool(a.pool.name).state === 2,
  [Proc.STORAGE_POOL_REFRESH]: (ctx, a) => void ctx.state.activePool(a.pool.name),
  [Proc.STORAGE_POOL_CREATE_XML]: (ctx, a) => poolRef(ctx.state.createPool(a.xml)),
  [Proc.STORAGE_POOL_DESTROY]: (ctx, a) => ctx.state.destroyPool(a.pool.name),
  [Proc.STORAGE_VOL_CREATE_XML]: (ctx, a) => volRef(ctx.state.createVolume(a.pool.name, a.xml)),
  [Proc.STORAGE_VOL_CREATE_XML_FROM]: (ctx, a) => volRef(ctx.state.createVolume(a.pool.name, a.xml, volumeOf(ctx, a.clonevol))),
  [Proc.STORAGE_VOL_LOOKUP_BY_NAME]: (ctx, a) => volRef(ctx.state.volume(a.pool.name, a.name)),
  [Proc.STORAGE_VOL_GET_INFO]: (ctx, a) => {
    const v = volumeOf(ctx, a.vol);
    return { type: v.type, capacity: Math.max(v.capacity, v.content.length), allocation: v.content.length };
  },
  [Proc.STORAGE_VOL_GET_PATH]: (ctx, a) => volumeOf(ctx, a.vol).key,
  [Proc.STORAGE_VOL_RESIZE]: (ctx, a) => void (volumeOf(ctx, a.vol).capacity = a.capacity),
  [Proc.STORAGE_VOL_DELETE]: (ctx, a) => ctx.state.deleteVolume(a.vol.pool, a.vol.name),
  [Proc.STORAGE_VOL_UPLOAD]: (ctx, a) => {
    const v = volumeOf(ctx, a.vol);
    if (ctx.state.driver === 'test') {
      throw fault(ErrorCode.NO_SUPPORT, ErrorDomain.STORAGE, 'this function is not supported by the connection driver: virStorageVolUpload');
    }
    ctx.startUpload(v, a.offset, a.length);
  },
  [Proc.STORAGE_VOL_DOWNLOAD]: (ctx, a) => {
    const v = volumeOf(ctx, a.vol);
    ctx.startDownload(v, a.offset, a.length);
  },
};

/** The fake's implementation of a procedure number, or undefined (→ "unknown procedure"). */
export function fakeProcedure(proc: number): FakeProcedure | undefined {
  const handle = HANDLERS[proc] ?? (AUTH_PROCS.has(proc) ? () => undefined : undefined);
  if (!handle) return undefined;
  const def = procedureByNumber(proc);
  if (!def) return undefined;
  return { name: def.name, args: def.args, ret: def.ret, handle };
}

/** Auth procedures are handled by the session itself (they change its state). */
export const AUTH_PROCS: ReadonlySet<number> = new Set([66, 67, 68, 69, 70]);
