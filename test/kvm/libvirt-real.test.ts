/**
 * The client against the REAL libvirtd of the KVM test host (scripts/kvm-test-host.sh), over its
 * local unix socket. The SSH path is covered by the pool's tests.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  ConnectionClosedError,
  LibvirtError,
  openLibvirtConnection,
  type DomainRef,
  type LibvirtConnection,
  type LifecycleEvent,
  type OpenLibvirtOptions,
  type StorageVolRef,
} from '../../src/kvm/libvirt/index.ts';
import { silentLogger } from '../../src/logging.ts';
import { kvmTestHost, type KvmTestHost } from '../support/kvm-host.ts';
import { waitFor } from '../fakes/libvirt/harness.ts';

let host: KvmTestHost;
const conns: LibvirtConnection[] = [];
const cleanups: (() => Promise<unknown>)[] = [];
const sig = (): AbortSignal => AbortSignal.timeout(30_000);
const unique = (what: string): string => `egress-lvtest-${what}-${randomUUID().slice(0, 8)}`;

async function connect(uri = host.uri, extra: Partial<OpenLibvirtOptions> = {}): Promise<LibvirtConnection> {
  const sock = net.connect(host.socket);
  await new Promise<void>((resolve, reject) => {
    sock.once('connect', resolve);
    sock.once('error', reject);
  });
  const conn = await openLibvirtConnection(sock, { uri, signal: sig(), logger: silentLogger(), ...extra });
  conns.push(conn);
  return conn;
}

async function kindOf(p: Promise<unknown>): Promise<[string, number, number]> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LibvirtError);
  const e = err as LibvirtError;
  return [e.kind, e.libvirtCode, e.libvirtDomain];
}

beforeAll(async () => {
  host = await kvmTestHost();
}, 300_000);

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

afterAll(async () => {
  await Promise.all(conns.map((c) => c.close()));
});

describe('real libvirtd (qemu:///system)', () => {
  it('reports library version, hostname and type', async () => {
    const conn = await connect();
    expect(await conn.getLibVersion(sig())).toBeGreaterThanOrEqual(9_000_000);
    expect(await conn.getHostname(sig())).toBe(hostname());
    expect(await conn.getType(sig())).toBe('QEMU');
    expect(await conn.getVersion(sig())).toBeGreaterThan(1_000_000);
  });

  it('reads pool info of a running, an inactive and a missing pool', async () => {
    const conn = await connect();
    const pool = await conn.storagePoolLookupByName(host.pool, sig());
    const info = await conn.storagePoolGetInfo(pool, sig());
    expect(info).toMatchObject({ state: 2, stateWord: 'running' });
    expect(info.capacity).toBeGreaterThan(0);
    expect(info.available).toBeLessThanOrEqual(info.capacity);
    expect(await conn.storagePoolIsActive(pool, sig())).toBe(true);
    await conn.storagePoolRefresh(pool, sig());

    const inactive = await conn.storagePoolLookupByName(host.inactivePool, sig());
    expect(await conn.storagePoolGetInfo(inactive, sig())).toMatchObject({ state: 0, stateWord: 'inactive' });
    expect(await conn.storagePoolIsActive(inactive, sig())).toBe(false);

    expect(await kindOf(conn.storagePoolLookupByName(unique('nopool'), sig()))).toEqual(['not-found', 49, 18]);
    const names = (await conn.listAllStoragePools(0, sig())).map((p) => p.name);
    expect(names).toEqual(expect.arrayContaining([host.pool, host.inactivePool]));
    expect((await conn.listAllStoragePools(1, sig())).map((p) => p.name)).toContain(host.inactivePool);
  });

  it('defines, starts, tags, destroys and undefines a small TCG domain', async () => {
    const conn = await connect();
    const name = unique('dom');
    const xml = `<domain type='qemu'><name>${name}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>
      <os><type arch='x86_64' machine='pc'>hvm</type></os><on_poweroff>destroy</on_poweroff>
      <devices><graphics type='vnc' listen='127.0.0.1'/></devices></domain>`;
    const dom: DomainRef = await conn.domainDefineXml(xml, 0, sig());
    cleanups.push(async () => {
      const d = await conn.domainLookupByName(name, sig());
      await conn.domainDestroy(d, 0, sig()).catch(() => undefined);
      await conn.domainUndefine(d, 0, sig());
    });
    expect(dom).toMatchObject({ name, id: -1 });
    expect(dom.uuid.length).toBe(16);
    expect(await conn.domainGetState(dom, sig())).toEqual({ state: 5, reason: 0 });
    expect(await kindOf(conn.domainDefineXml(xml, 0, sig()))).toEqual(['exists', 9, 20]);

    const uri = 'urn:egress-proxies:test';
    expect(await kindOf(conn.domainGetMetadata(dom, { type: 2, uri, flags: 2 }, sig()))).toEqual(['not-found', 80, 20]);

    const running = await conn.domainCreate(dom, 0, sig());
    expect(running.id).toBeGreaterThan(0);
    expect(await conn.domainGetState(dom, sig())).toEqual({ state: 1, reason: 1 });
    const info = await conn.domainGetInfo(dom, sig());
    expect(info).toMatchObject({ state: 1, maxMemKiB: 65536, nrVirtCpu: 1 });
    expect((await conn.listAllDomains(1, sig())).map((d) => d.name)).toContain(name);
    expect(await conn.domainGetXmlDesc(dom, 0, sig())).toContain(`<name>${name}</name>`);
    expect((await conn.domainLookupByUuid(dom.uuid, sig())).name).toBe(name);
    expect(await conn.domainIsActive(dom, sig())).toBe(true);
    await conn.domainShutdown(dom, 0, sig()); // ACPI request; SeaBIOS without an OS ignores it

    await conn.domainSetMetadata(dom, { type: 2, metadata: '<egress managed="true" pool="p1"/>', key: 'eg', uri, flags: 3 }, sig());
    expect(await conn.domainGetMetadata(dom, { type: 2, uri, flags: 1 }, sig())).toContain('managed="true"');
    expect(await conn.domainGetMetadata(dom, { type: 2, uri, flags: 2 }, sig())).toContain('pool="p1"');

    await conn.domainDestroy(dom, 0, sig());
    expect(await conn.domainGetState(dom, sig())).toEqual({ state: 5, reason: 2 });
    expect(await kindOf(conn.domainDestroy(dom, 0, sig()))).toEqual(['invalid-state', 55, 20]);
    await conn.domainUndefine(dom, 0, sig());
    cleanups.pop();
    expect((await kindOf(conn.domainLookupByName(name, sig())))[0]).toBe('not-found');
  });

  it('creates a volume, uploads more than 1 MiB byte for byte, downloads it back, and deletes it', async () => {
    const conn = await connect();
    const pool = await conn.storagePoolLookupByName(host.pool, sig());
    const name = `${unique('vol')}.raw`;
    const vol: StorageVolRef = await conn.storageVolCreateXml(
      pool,
      `<volume><name>${name}</name><capacity unit='MiB'>2</capacity><target><format type='raw'/></target></volume>`,
      0,
      sig(),
    );
    cleanups.push(() => conn.storageVolDelete(vol, 0, sig()));
    expect(vol.key).toBe(join(host.poolDir, name));
    expect(await kindOf(conn.storageVolCreateXml(pool, `<volume><name>${name}</name><capacity>1</capacity></volume>`, 0, sig()))).toEqual(['exists', 90, 18]);

    const data = randomBytes(1_600_000);
    const chunks = Array.from({ length: Math.ceil(data.length / 65_536) }, (_, i) => data.subarray(i * 65_536, (i + 1) * 65_536));
    const result = await conn.storageVolUpload(vol, Readable.from(chunks), { length: data.length }, sig());
    expect(result.bytes).toBe(data.length);
    const onDisk = await readFile(vol.key);
    expect(onDisk.subarray(0, data.length).equals(data)).toBe(true);
    const downloaded: Buffer[] = [];
    await conn.storageVolDownload(vol, (c) => void downloaded.push(c), { length: data.length }, sig());
    expect(Buffer.concat(downloaded).equals(data)).toBe(true);
    expect((await conn.storageVolGetInfo(vol, sig())).capacity).toBe(2 * 1024 * 1024);
    expect(await conn.storageVolGetPath(vol, sig())).toBe(vol.key);
    expect((await conn.storagePoolListAllVolumes(pool, sig())).map((v) => v.name)).toContain(name);
    await conn.storageVolResize(vol, 3 * 1024 * 1024, 0, sig());
    expect((await conn.storageVolGetInfo(vol, sig())).capacity).toBe(3 * 1024 * 1024);

    // Writing past `length`: the daemon's STREAM ERROR (38/38), then its stray STREAM OK is ignored.
    const err = await conn.storageVolUpload(vol, [Buffer.alloc(300_000)], { length: 1000 }, sig()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ libvirtCode: 38, libvirtDomain: 38 });
    expect(await conn.getType(sig())).toBe('QEMU');

    await conn.storageVolDelete(vol, 0, sig());
    cleanups.pop();
    expect(await kindOf(conn.storageVolLookupByName(pool, name, sig()))).toEqual(['not-found', 50, 18]);
  });

  it('delivers lifecycle events (MESSAGE 318, routed by procedure) after REGISTER_ANY', async () => {
    const conn = await connect();
    const events: LifecycleEvent[] = [];
    conn.onDomainLifecycle((e) => events.push(e));
    const callbackId = await conn.domainEventRegisterAny(0, null, sig());
    const name = unique('ev');
    const dom = await conn.domainDefineXml(
      `<domain type='qemu'><name>${name}</name><memory unit='MiB'>64</memory><os><type arch='x86_64' machine='pc'>hvm</type></os></domain>`,
      0,
      sig(),
    );
    cleanups.push(() => conn.domainUndefine(dom, 0, sig()));
    await conn.domainUndefine(dom, 0, sig());
    cleanups.pop();
    await waitFor(() => events.filter((e) => e.dom.name === name).length >= 2, 'defined and undefined events');
    expect(events.filter((e) => e.dom.name === name).map((e) => [e.callbackId, e.event])).toEqual([
      [callbackId, 0],
      [callbackId, 1],
    ]);
    await conn.domainEventDeregisterAny(callbackId, sig());
  });

  it('runs more calls than the in-flight cap concurrently', async () => {
    const conn = await connect(host.uri, { maxInFlight: 4 });
    const names = await Promise.all(Array.from({ length: 24 }, () => conn.getHostname(sig())));
    expect(new Set(names)).toEqual(new Set([hostname()]));
    expect(conn.stats()).toMatchObject({ inFlight: 0, queued: 0 });
  });

  it('gets PONGs for its keepalive PINGs (the connection survives many short intervals)', async () => {
    const conn = await connect(host.uri, { keepalive: { intervalMs: 10, timeoutMs: 30_000 } });
    await waitFor(() => conn.stats().pongsReceived >= 5, 'five PONGs for the client PINGs', 30_000);
    expect(conn.closed).toBe(false);
    expect(await conn.getType(sig())).toBe('QEMU');
  });

  it('answers the PINGs libvirtd sends after SUPPORTS_FEATURE(10) (5 s of silence)', async () => {
    const conn = await connect(host.uri, { keepalive: false });
    await waitFor(() => conn.stats().pingsAnswered >= 1, 'a PING from libvirtd', 15_000);
    expect(conn.closed).toBe(false);
  }, 30_000);

  it('closes with CONNECT_CLOSE', async () => {
    const conn = await connect();
    await conn.close();
    expect(conn.closed).toBe(true);
    expect(conn.closeReason).toBeInstanceOf(ConnectionClosedError);
  });
});

describe('real libvirtd, test driver (test:///default)', () => {
  it('serves the canned host', async () => {
    const conn = await connect('test:///default');
    expect(await conn.getType(sig())).toBe('TEST');
    expect(await conn.getVersion(sig())).toBe(2);
    const dom = await conn.domainLookupByName('test', sig());
    expect(dom.id).toBe(1);
    expect((await conn.domainGetState(dom, sig())).state).toBe(1);
    expect((await conn.domainGetInfo(dom, sig())).nrVirtCpu).toBeGreaterThan(0);
    expect((await conn.listAllDomains(0, sig())).map((d) => d.name)).toContain('test');
    const ifaces = await conn.domainInterfaceAddresses(dom, 0, sig());
    expect(ifaces[0]?.addrs[0]?.type).toBe(0);
    expect(await kindOf(conn.domainLookupByName(unique('none'), sig()))).toEqual(['not-found', 42, 12]);

    const pool = await conn.storagePoolLookupByName('default-pool', sig());
    expect(await conn.storagePoolGetInfo(pool, sig())).toMatchObject({ stateWord: 'running' });
    const vol = await conn.storageVolCreateXml(pool, `<volume><name>${unique('tv')}</name><capacity>1024</capacity></volume>`, 0, sig());
    const clone = await conn.storageVolCreateXmlFrom(pool, `<volume><name>${unique('tc')}</name><capacity>1024</capacity></volume>`, vol, 0, sig());
    expect((await conn.storageVolGetInfo(clone, sig())).capacity).toBe(1024);
    expect(await kindOf(conn.storageVolUpload(vol, [Buffer.from('abc')], {}, sig()))).toEqual(['unsupported', 3, 18]);
    await conn.storageVolDelete(clone, 0, sig());
    await conn.storageVolDelete(vol, 0, sig());
  });
});
