/**
 * In-memory host model of the fake libvirt daemon: domains, storage pools, volumes with content
 * bytes, metadata per namespace URI. Operations throw FakeFault with the code/domain pair the
 * real daemon answers (test-fakes notes §3.3); `driver` picks the qemu or the test driver flavour.
 */
import { randomUUID } from 'node:crypto';
import { ErrorCode, ErrorDomain } from '../../../src/kvm/libvirt/constants.ts';
import type { RemoteError } from '../../../src/kvm/libvirt/errors.ts';
import { remoteError } from '../../../src/kvm/libvirt/codecs.ts';

export class FakeFault extends Error {
  constructor(readonly remote: RemoteError) {
    super(remote.message ?? 'fault');
  }
}

export const fault = (code: number, domain: number, message: string): FakeFault => new FakeFault(remoteError(code, domain, message));

export interface FakeDomain {
  name: string;
  uuid: Buffer;
  id: number;
  state: number;
  reason: number;
  xml: string;
  memoryKiB: number;
  vcpus: number;
  persistent: boolean;
  /** ELEMENT metadata by namespace URI; description/title under 'type:0' / 'type:1'. */
  metadata: Map<string, { key: string | null; value: string }>;
}

export interface FakeVolume {
  pool: string;
  name: string;
  key: string;
  type: number;
  capacity: number;
  content: Buffer;
}

export interface FakePool {
  name: string;
  uuid: Buffer;
  state: number;
  capacity: number;
  path: string;
  persistent: boolean;
  volumes: Map<string, FakeVolume>;
}

export type FakeDriver = 'qemu' | 'test';

const UNITS: Record<string, number> = {
  b: 1,
  bytes: 1,
  k: 1024,
  kib: 1024,
  kb: 1000,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  mb: 1e6,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  gb: 1e9,
  t: 1024 ** 4,
  tib: 1024 ** 4,
  tb: 1e12,
};

/** Text of the first `<tag …>text</tag>` and its `unit` attribute (fixtures only, not a real XML parser). */
export function xmlField(xml: string, tag: string): { text: string; unit: string | undefined } | undefined {
  const open = xml.indexOf(`<${tag}`);
  if (open < 0) return undefined;
  const gt = xml.indexOf('>', open);
  const close = xml.indexOf(`</${tag}>`, gt);
  if (gt < 0 || close < 0) return undefined;
  const attrs = xml.slice(open + tag.length + 1, gt);
  const unit = /unit=['"]([A-Za-z]+)['"]/.exec(attrs)?.[1];
  return { text: xml.slice(gt + 1, close).trim(), unit };
}

export function xmlSize(xml: string, tag: string, defaultUnit: string): number | undefined {
  const f = xmlField(xml, tag);
  if (!f) return undefined;
  const factor = UNITS[(f.unit ?? defaultUnit).toLowerCase()] ?? 1;
  return Number(f.text) * factor;
}

function uuidBytes(text: string | undefined): Buffer {
  return Buffer.from((text ?? randomUUID()).replace(/-/g, ''), 'hex');
}

export class FakeLibvirtState {
  readonly domains = new Map<string, FakeDomain>();
  readonly pools = new Map<string, FakePool>();
  private nextId = 1;
  /** Called on lifecycle transitions: event 0 defined, 1 undefined, 2 started, 5 stopped. */
  onLifecycle: ((dom: FakeDomain, event: number, detail: number) => void) | undefined;

  constructor(readonly driver: FakeDriver = 'qemu') {}

  private get domErr(): number {
    return this.driver === 'test' ? ErrorDomain.TEST : ErrorDomain.QEMU;
  }
  private get poolErr(): number {
    return this.driver === 'test' ? ErrorDomain.TEST : ErrorDomain.STORAGE;
  }

  // ---- seeding (bypasses the API) ----
  addPool(p: { name: string; state?: number; capacity?: number; path?: string; persistent?: boolean }): FakePool {
    const pool: FakePool = {
      name: p.name,
      uuid: uuidBytes(undefined),
      state: p.state ?? 2,
      capacity: p.capacity ?? 100 * 1024 ** 3,
      path: p.path ?? `/fake/pools/${p.name}`,
      persistent: p.persistent ?? true,
      volumes: new Map(),
    };
    this.pools.set(pool.name, pool);
    return pool;
  }

  // ---- domains ----
  domain(name: string): FakeDomain {
    const d = this.domains.get(name);
    if (!d) throw fault(ErrorCode.NO_DOMAIN, this.domErr, `Domain not found: no domain with matching name '${name}'`);
    return d;
  }

  domainByUuid(uuid: Buffer): FakeDomain {
    for (const d of this.domains.values()) if (d.uuid.equals(uuid)) return d;
    const h = uuid.toString('hex');
    const text = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    throw fault(ErrorCode.NO_DOMAIN, this.domErr, `Domain not found: no domain with matching uuid '${text}'`);
  }

  /** No guest OS here: a shutdown request powers the domain off at once (reason 1, shutdown). */
  shutdown(name: string): void {
    const d = this.domain(name);
    if (d.state !== 1) throw fault(ErrorCode.OPERATION_INVALID, ErrorDomain.DOMAIN, 'Requested operation is not valid: domain is not running');
    d.state = 5;
    d.reason = 1;
    d.id = -1;
    this.onLifecycle?.(d, 5, 0);
    if (!d.persistent) this.domains.delete(name);
  }

  define(xml: string): FakeDomain {
    const name = xmlField(xml, 'name')?.text;
    if (!name) throw fault(27, ErrorDomain.DOMAIN, 'XML error: missing domain name');
    const uuid = uuidBytes(xmlField(xml, 'uuid')?.text);
    const existing = this.domains.get(name);
    if (existing && !existing.uuid.equals(uuid)) {
      throw fault(ErrorCode.OPERATION_FAILED, ErrorDomain.DOMAIN, `operation failed: domain '${name}' is already defined with uuid`);
    }
    const dom: FakeDomain = existing ?? {
      name,
      uuid,
      id: -1,
      state: 5,
      reason: 0,
      xml,
      memoryKiB: 0,
      vcpus: 1,
      persistent: true,
      metadata: new Map(),
    };
    dom.xml = xml;
    dom.persistent = true;
    dom.memoryKiB = Math.round((xmlSize(xml, 'memory', 'KiB') ?? 65536 * 1024) / 1024);
    dom.vcpus = Number(xmlField(xml, 'vcpu')?.text ?? 1);
    this.domains.set(name, dom);
    this.onLifecycle?.(dom, 0, existing ? 1 : 0);
    return dom;
  }

  start(name: string): FakeDomain {
    const d = this.domain(name);
    if (d.state === 1) {
      throw this.driver === 'test'
        ? fault(ErrorCode.INTERNAL_ERROR, ErrorDomain.TEST, 'internal error: Domain is already running')
        : fault(ErrorCode.OPERATION_INVALID, ErrorDomain.DOMAIN, 'Requested operation is not valid: domain is already active');
    }
    d.state = 1;
    d.reason = 1;
    d.id = this.nextId++;
    this.onLifecycle?.(d, 2, 0);
    return d;
  }

  destroy(name: string): void {
    const d = this.domain(name);
    if (d.state !== 1 && d.state !== 3) {
      throw fault(ErrorCode.OPERATION_INVALID, ErrorDomain.DOMAIN, 'Requested operation is not valid: domain is not running');
    }
    d.state = 5;
    d.reason = 2;
    d.id = -1;
    this.onLifecycle?.(d, 5, 1);
    if (!d.persistent) this.domains.delete(name);
  }

  undefine(name: string): void {
    const d = this.domain(name);
    if (d.state === 1) d.persistent = false;
    else this.domains.delete(name);
    this.onLifecycle?.(d, 1, 0);
  }

  getMetadata(name: string, type: number, uri: string | null): string {
    const d = this.domain(name);
    const m = d.metadata.get(type === 2 ? `uri:${uri ?? ''}` : `type:${type}`);
    if (!m) throw fault(ErrorCode.NO_DOMAIN_METADATA, ErrorDomain.DOMAIN, 'metadata not found: Requested metadata element is not present');
    return m.value;
  }

  setMetadata(name: string, type: number, value: string | null, key: string | null, uri: string | null): void {
    const d = this.domain(name);
    const slot = type === 2 ? `uri:${uri ?? ''}` : `type:${type}`;
    if (value === null) d.metadata.delete(slot);
    else d.metadata.set(slot, { key, value });
  }

  // ---- pools ----
  pool(name: string): FakePool {
    const p = this.pools.get(name);
    if (!p) throw fault(ErrorCode.NO_STORAGE_POOL, this.poolErr, `Storage pool not found: no storage pool with matching name '${name}'`);
    return p;
  }

  activePool(name: string): FakePool {
    const p = this.pool(name);
    if (p.state !== 2) throw fault(ErrorCode.OPERATION_INVALID, this.poolErr, `Requested operation is not valid: storage pool '${name}' is not active`);
    return p;
  }

  createPool(xml: string): FakePool {
    const name = xmlField(xml, 'name')?.text;
    if (!name) throw fault(27, ErrorDomain.STORAGE, 'XML error: missing pool source name element');
    if (this.pools.has(name)) throw fault(ErrorCode.OPERATION_FAILED, this.poolErr, `operation failed: pool '${name}' already exists`);
    return this.addPool({ name, path: xmlField(xml, 'path')?.text ?? `/fake/pools/${name}`, persistent: false });
  }

  startPool(name: string): void {
    const p = this.pool(name);
    if (p.state === 2) throw fault(ErrorCode.OPERATION_INVALID, this.poolErr, `Requested operation is not valid: storage pool '${name}' is already active`);
    p.state = 2;
  }

  destroyPool(name: string): void {
    const p = this.activePool(name);
    if (p.persistent) p.state = 0;
    else this.pools.delete(name);
  }

  usedBytes(p: FakePool): number {
    let used = 0;
    for (const v of p.volumes.values()) used += v.content.length;
    return used;
  }

  // ---- volumes ----
  volume(poolName: string, name: string): FakeVolume {
    const v = this.pool(poolName).volumes.get(name);
    if (!v) throw fault(ErrorCode.NO_STORAGE_VOL, this.poolErr, `Storage volume not found: no storage vol with matching name '${name}'`);
    return v;
  }

  createVolume(poolName: string, xml: string, from?: FakeVolume): FakeVolume {
    const p = this.activePool(poolName);
    const name = xmlField(xml, 'name')?.text;
    if (!name) throw fault(27, ErrorDomain.STORAGE, 'XML error: missing volume name element');
    if (p.volumes.has(name)) {
      throw this.driver === 'test'
        ? fault(ErrorCode.OPERATION_FAILED, ErrorDomain.TEST, `operation failed: storage vol '${name}' already exists`)
        : fault(ErrorCode.STORAGE_VOL_EXIST, ErrorDomain.STORAGE, `storage volume already exists: '${name}'`);
    }
    const vol: FakeVolume = {
      pool: p.name,
      name,
      key: `${p.path}/${name}`,
      type: 0,
      capacity: xmlSize(xml, 'capacity', 'bytes') ?? from?.capacity ?? 0,
      content: from ? Buffer.from(from.content) : Buffer.alloc(0),
    };
    p.volumes.set(name, vol);
    return vol;
  }

  deleteVolume(poolName: string, name: string): void {
    this.volume(poolName, name);
    this.pool(poolName).volumes.delete(name);
  }
}
