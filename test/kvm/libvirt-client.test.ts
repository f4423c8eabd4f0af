import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeXdr } from '../../src/kvm/libvirt/xdr.ts';
import { encodeFrame } from '../../src/kvm/libvirt/frame.ts';
import { FRAME_MAX, MessageType, Proc, REMOTE_PROGRAM } from '../../src/kvm/libvirt/constants.ts';
import { lifecycleEventCodec } from '../../src/kvm/libvirt/procedures.ts';
import {
  ConnectionClosedError,
  ConnectionLostError,
  KeepaliveTimeoutError,
  LibvirtAbortError,
  LibvirtAuthError,
  LibvirtConnection,
  LibvirtError,
  LibvirtProtocolError,
  StreamEndedError,
  isLibvirtNotFound,
  type LifecycleEvent,
} from '../../src/kvm/libvirt/index.ts';
import { FakeLibvirtServer } from '../fakes/libvirt/server.ts';
import { captureLogger, openOnFake, waitFor, type FakeHarness } from '../fakes/libvirt/harness.ts';

const sig = (): AbortSignal => AbortSignal.timeout(10_000);
const DOM_XML = (name: string): string =>
  `<domain type='qemu'><name>${name}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type>hvm</type></os></domain>`;

let harnesses: FakeHarness[] = [];
let servers: FakeLibvirtServer[] = [];

async function open(...args: Parameters<typeof openOnFake>): Promise<FakeHarness> {
  const h = await openOnFake(...args);
  harnesses.push(h);
  return h;
}

afterEach(async () => {
  for (const h of harnesses) {
    h.conn.destroy();
    await h.server.close();
  }
  for (const s of servers) await s.close();
  harnesses = [];
  servers = [];
});

describe('open and procedures against the fake', () => {
  it('opens with AUTH_LIST, SUPPORTS_FEATURE(10), OPEN and runs the domain lifecycle', async () => {
    const { conn, server } = await open();
    expect(server.requests.map((r) => r.name)).toEqual(['auth_list', 'connect_supports_feature', 'connect_open']);
    expect(server.requests[2]!.args).toEqual({ name: 'qemu:///system', flags: 0 });
    expect(await conn.getLibVersion(sig())).toBe(9_000_000);
    const dom = await conn.domainDefineXml(DOM_XML('d1'), 0, sig());
    expect(dom.id).toBe(-1);
    expect(await conn.domainGetState(dom, sig())).toEqual({ state: 5, reason: 0 });
    const running = await conn.domainCreate(dom, 0, sig());
    expect(running.id).toBeGreaterThan(0);
    expect(await conn.domainGetState(dom, sig())).toEqual({ state: 1, reason: 1 });
    expect(await conn.domainGetInfo(dom, sig())).toMatchObject({ state: 1, memoryKiB: 65536, nrVirtCpu: 1 });
    expect((await conn.listAllDomains(1, sig())).map((d) => d.name)).toEqual(['d1']);
    await conn.domainDestroy(dom, 0, sig());
    expect(await conn.domainGetState(dom, sig())).toEqual({ state: 5, reason: 2 });
    await conn.domainUndefine(dom, 0, sig());
    await expect(conn.domainLookupByName('d1', sig())).rejects.toSatisfy(isLibvirtNotFound);
  });

  it('maps daemon errors to typed kinds by number', async () => {
    const { conn, server } = await open();
    const dom = await conn.domainDefineXml(DOM_XML('d2'), 0, sig());
    const kindOf = async (p: Promise<unknown>): Promise<[string, number, number]> => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LibvirtError);
      const e = err as LibvirtError;
      return [e.kind, e.libvirtCode, e.libvirtDomain];
    };
    expect(await kindOf(conn.domainDestroy(dom, 0, sig()))).toEqual(['invalid-state', 55, 20]);
    expect(await kindOf(conn.domainDefineXml(DOM_XML('d2'), 0, sig()))).toEqual(['exists', 9, 20]);
    expect(await kindOf(conn.domainGetMetadata(dom, { type: 2, uri: 'urn:egress', flags: 0 }, sig()))).toEqual(['not-found', 80, 20]);
    expect(await kindOf(conn.storagePoolLookupByName('nope', sig()))).toEqual(['not-found', 49, 18]);
    const pool = await conn.storagePoolLookupByName('default', sig());
    expect(await kindOf(conn.storageVolLookupByName(pool, 'nope', sig()))).toEqual(['not-found', 50, 18]);
    await conn.storageVolCreateXml(pool, '<volume><name>v</name><capacity>1</capacity></volume>', 0, sig());
    expect(await kindOf(conn.storageVolCreateXml(pool, '<volume><name>v</name></volume>', 0, sig()))).toEqual(['exists', 90, 18]);
    server.faults.failNext('connect_get_type', 39, 7, 'unknown procedure: 3');
    expect(await kindOf(conn.getType(sig()))).toEqual(['unsupported', 39, 7]);
    server.faults.failNext('connect_get_type', 88, 20);
    expect(await kindOf(conn.getType(sig()))).toEqual(['access-denied', 88, 20]);
    // metadata set, then read back
    await conn.domainSetMetadata(dom, { type: 2, metadata: '<egress managed="true"/>', key: 'eg', uri: 'urn:egress', flags: 3 }, sig());
    expect(await conn.domainGetMetadata(dom, { type: 2, uri: 'urn:egress', flags: 0 }, sig())).toBe('<egress managed="true"/>');
  });

  it('lists pools and volumes, resolves paths, resizes, starts pools, finds domains by uuid', async () => {
    const server = new FakeLibvirtServer();
    server.state.addPool({ name: 'off', state: 0 });
    const { conn } = await open({}, {}, server);
    expect((await conn.listAllStoragePools(0, sig())).map((p) => p.name).sort()).toEqual(['default', 'off']);
    expect((await conn.listAllStoragePools(2, sig())).map((p) => p.name)).toEqual(['default']);
    const pool = await conn.storagePoolLookupByName('default', sig());
    const vol = await conn.storageVolCreateXml(pool, '<volume><name>r.img</name><capacity>10</capacity></volume>', 0, sig());
    expect(await conn.storagePoolListAllVolumes(pool, sig())).toEqual([vol]);
    expect(await conn.storageVolGetPath(vol, sig())).toBe(vol.key);
    await conn.storageVolResize(vol, 4096, 0, sig());
    expect((await conn.storageVolGetInfo(vol, sig())).capacity).toBe(4096);
    const off = await conn.storagePoolLookupByName('off', sig());
    await conn.storagePoolCreate(off, sig());
    expect(await conn.storagePoolIsActive(off, sig())).toBe(true);
    await expect(conn.storagePoolCreate(off, sig())).rejects.toMatchObject({ kind: 'invalid-state' });
    const dom = await conn.domainDefineXml(DOM_XML('byuuid'), 0, sig());
    expect(await conn.domainLookupByUuid(dom.uuid, sig())).toEqual(dom);
    expect(await conn.domainIsActive(dom, sig())).toBe(false);
    await conn.domainCreate(dom, 0, sig());
    await conn.domainShutdown(dom, 1, sig());
    expect(await conn.domainGetState(dom, sig())).toEqual({ state: 5, reason: 1 });
    await expect(conn.domainLookupByUuid(Buffer.alloc(16), sig())).rejects.toSatisfy(isLibvirtNotFound);
  });

  it('reports storage pool state in numbers and virsh words', async () => {
    const server = new FakeLibvirtServer();
    server.state.addPool({ name: 'off', state: 0 });
    const { conn } = await open({}, {}, server);
    const info = await conn.storagePoolGetInfo(await conn.storagePoolLookupByName('default', sig()), sig());
    expect(info).toMatchObject({ state: 2, stateWord: 'running' });
    const off = await conn.storagePoolLookupByName('off', sig());
    expect(await conn.storagePoolGetInfo(off, sig())).toMatchObject({ state: 0, stateWord: 'inactive', capacity: 0 });
    expect(await conn.storagePoolIsActive(off, sig())).toBe(false);
    await expect(conn.storagePoolRefresh(off, sig())).rejects.toMatchObject({ kind: 'invalid-state' });
  });

  it('follows the polkit path and fails typed when polkit or SASL refuses', async () => {
    const ok = await open({ authTypes: [2] });
    expect(ok.server.requests.map((r) => r.name)).toEqual(['auth_list', 'auth_polkit', 'connect_supports_feature', 'connect_open']);
    expect(ok.conn.authenticated).toBe(true);

    const denied = new FakeLibvirtServer({ authTypes: [2], polkitAllowed: false });
    servers.push(denied);
    const err = await openOnFake({}, {}, denied).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ kind: 'auth', libvirtCode: 45 });
    await waitFor(() => denied.sessions.size === 0, 'the refused stream to close');

    const sasl = new FakeLibvirtServer({ authTypes: [1] });
    servers.push(sasl);
    await expect(openOnFake({}, {}, sasl)).rejects.toBeInstanceOf(LibvirtAuthError);
  });

  it('classifies 39/7 as auth before authentication and 1/7 before CONNECT_OPEN', async () => {
    const server = new FakeLibvirtServer();
    servers.push(server);
    await server.listen();
    const conn = new LibvirtConnection(await server.connect(), { logger: captureLogger().logger, keepalive: false });
    await expect(conn.getType(sig())).rejects.toMatchObject({ kind: 'auth', libvirtCode: 39, libvirtDomain: 7 });
    expect(await conn.authList(sig())).toEqual([0]);
    conn.authenticated = true;
    await expect(conn.getType(sig())).rejects.toMatchObject({ kind: 'other', libvirtCode: 1, libvirtDomain: 7 });
    conn.destroy();
  });

  it('rejects uploads on the test driver as unsupported', async () => {
    const { conn, server } = await open({ driver: 'test' });
    server.state.pools.get('default')!.volumes.set('x', { pool: 'default', name: 'x', key: '/x', type: 0, capacity: 10, content: Buffer.alloc(0) });
    const vol = await conn.storageVolLookupByName(await conn.storagePoolLookupByName('default', sig()), 'x', sig());
    await expect(conn.storageVolUpload(vol, [Buffer.from('abc')], {}, sig())).rejects.toMatchObject({ kind: 'unsupported', libvirtCode: 3, libvirtDomain: 18 });
  });
});

describe('multiplexing', () => {
  it('caps calls in flight so the daemon never stops reading', async () => {
    const { conn, server, session } = await open();
    const gate = server.faults.gate('connect_get_hostname');
    const calls = Array.from({ length: 10 }, () => conn.getHostname(sig()));
    await gate.untilHeld(4);
    expect(session.inFlight).toBe(4);
    expect(conn.stats()).toMatchObject({ inFlight: 4, queued: 6 });
    expect(session.stalled).toBe(false);
    // The daemon still reads: PINGs sent now are answered while 4 calls are held.
    session.pingFlood(3);
    await waitFor(() => session.pingsReceived === 0 && session.pongsReceived === 3, 'PONGs while 4 calls are held');
    gate.openGate();
    expect(await Promise.all(calls)).toEqual(Array(10).fill('fake-libvirt-host'));
    expect(conn.stats()).toMatchObject({ inFlight: 0, queued: 0 });
  });

  it('the fake stalls a client that exceeds max_client_requests (the cap matters)', async () => {
    const { conn, server, session } = await open({}, { maxInFlight: 8 });
    const gate = server.faults.gate('connect_get_hostname');
    const calls = Array.from({ length: 8 }, () => conn.getHostname(sig()));
    await gate.untilHeld(5);
    await waitFor(() => session.stalled, 'the fake to stop reading');
    session.pingFlood(1);
    expect(session.pongsReceived).toBe(0);
    gate.openGate();
    await Promise.all(calls);
    await waitFor(() => session.pongsReceived === 1, 'the PONG once reading resumed');
  });

  it('routes replies by serial when they arrive in reverse order', async () => {
    const { conn, server } = await open();
    for (const n of ['a', 'b', 'c']) server.state.define(DOM_XML(n));
    const gate = server.faults.gate('domain_lookup_by_name');
    const calls = ['a', 'b', 'c'].map((n) => conn.domainLookupByName(n, sig()));
    await gate.untilHeld(3);
    gate.releaseReversed();
    expect((await Promise.all(calls)).map((d) => d.name)).toEqual(['a', 'b', 'c']);
  });

  it('rejects an aborted call at once, keeps its serial as a tombstone and drops the late reply', async () => {
    const { conn, server, log } = await open();
    const gate = server.faults.gate('connect_get_hostname');
    const ac = new AbortController();
    const call = conn.getHostname(ac.signal);
    await gate.untilHeld(1);
    const reason = new Error('job cancelled');
    ac.abort(reason);
    const err = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LibvirtAbortError);
    expect((err as LibvirtAbortError).cause).toBe(reason);
    expect((err as LibvirtAbortError).mayHaveExecuted).toBe(true);
    expect(conn.stats()).toMatchObject({ inFlight: 1, tombstones: 1 });
    gate.release();
    expect(await conn.getType(sig())).toBe('QEMU');
    expect(conn.stats()).toMatchObject({ inFlight: 0, tombstones: 0 });
    expect(log.lines.some((l) => l.msg === 'late libvirt reply dropped')).toBe(true);
  });

  it('a queued call whose signal ends leaves the queue and is never sent', async () => {
    const { conn, server } = await open({}, { maxInFlight: 1 });
    const gate = server.faults.gate('connect_get_hostname');
    const first = conn.getHostname(sig());
    await gate.untilHeld(1);
    const ac = new AbortController();
    const queued = conn.getType(ac.signal);
    expect(conn.stats().queued).toBe(1);
    ac.abort(new Error('stop'));
    await expect(queued).rejects.toMatchObject({ name: 'AbortError', mayHaveExecuted: false });
    expect(conn.stats().queued).toBe(0);
    gate.release();
    await first;
    expect(server.requests.some((r) => r.name === 'connect_get_type')).toBe(false);
  });

  it('routes MESSAGE packets by program and procedure, never by serial', async () => {
    const { conn, server, session } = await open();
    const events: LifecycleEvent[] = [];
    conn.onDomainLifecycle((e) => events.push(e));
    const id = await conn.domainEventRegisterAny(0, null, sig());
    const gate = server.faults.gate('connect_get_hostname');
    const pending = conn.getHostname(sig());
    await gate.untilHeld(1);
    const serial = server.requests.at(-1)!.serial;
    const dom = server.state.define(DOM_XML('ev'));
    // A MESSAGE carrying the pending call's serial must not complete that call.
    session.sendMessage(Proc.DOMAIN_EVENT_CALLBACK_LIFECYCLE, encodeXdr({ callbackId: id, dom, event: 2, detail: 0 }, lifecycleEventCodec.write), serial);
    await waitFor(() => events.length === 2, 'two lifecycle events');
    expect(events.map((e) => [e.dom.name, e.event])).toEqual([
      ['ev', 0],
      ['ev', 2],
    ]);
    gate.release();
    expect(await pending).toBe('fake-libvirt-host');
  });
});

describe('connection loss, keepalive and malformed input', () => {
  it('rejects every pending call with ConnectionLostError when the peer drops', async () => {
    const { conn, server, session } = await open({}, { maxInFlight: 3 });
    const gate = server.faults.gate('connect_get_hostname');
    const calls = Array.from({ length: 5 }, () =>
      conn.getHostname(sig()).then(
        () => undefined,
        (e: unknown) => e,
      ),
    );
    await gate.untilHeld(3);
    const reasons: Error[] = [];
    conn.onClose((r) => reasons.push(r));
    session.destroy();
    const errs = (await Promise.all(calls)) as ConnectionLostError[];
    for (const e of errs) expect(e).toBeInstanceOf(ConnectionLostError);
    expect(errs.map((e) => e.mayHaveExecuted)).toEqual([true, true, true, false, false]);
    expect(errs[0]!.message).toMatch(/MAY HAVE EXECUTED/);
    expect(errs[0]!.retryable).toBe(true);
    expect(conn.closed).toBe(true);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toBeInstanceOf(StreamEndedError);
    await expect(conn.getType(sig())).rejects.toMatchObject({ code: 'ERR_LIBVIRT_CONNECTION_LOST', mayHaveExecuted: false });
    const late: Error[] = [];
    conn.onClose((r) => late.push(r));
    await waitFor(() => late.length === 1, 'a late onClose listener');
    expect(reasons).toHaveLength(1);
  });

  it('answers every PING from the daemon, alone and in floods', async () => {
    const { conn, session } = await open({ keepalive: { intervalMs: 15, count: 2 } });
    await waitFor(() => session.pongsReceived >= 3, 'PONGs to server pings');
    session.pingFlood(50);
    await waitFor(() => session.pongsReceived >= 53, 'PONGs to a PING flood');
    expect(conn.closed).toBe(false);
    expect(await conn.getType(sig())).toBe('QEMU');
  });

  it('detects a silent peer with its own keepalive and fails pending calls', async () => {
    const { conn, server } = await open({ keepalive: false }, { keepalive: { intervalMs: 30, timeoutMs: 30 } });
    const closed = new Promise<Error>((resolve) => conn.onClose(resolve));
    server.faults.silent = true;
    const pending = conn.getHostname(sig()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(await closed).toBeInstanceOf(KeepaliveTimeoutError);
    expect(await pending).toMatchObject({ code: 'ERR_LIBVIRT_CONNECTION_LOST', mayHaveExecuted: true });
  });

  it('the fake closes a client that never answers its PINGs', async () => {
    const server = new FakeLibvirtServer({ keepalive: { intervalMs: 10, count: 2 } });
    servers.push(server);
    await server.listen();
    const sock = await server.connect();
    const closed = new Promise<void>((resolve) => sock.once('close', () => resolve()));
    sock.on('data', () => undefined);
    const call = (serial: number, proc: number, payload?: Buffer): Buffer =>
      encodeFrame({ prog: REMOTE_PROGRAM, proc, type: MessageType.CALL, serial, status: 0 }, payload);
    sock.write(call(1, Proc.AUTH_LIST));
    sock.write(
      call(
        2,
        Proc.CONNECT_SUPPORTS_FEATURE,
        encodeXdr(10, (w, v) => w.int(v)),
      ),
    );
    await closed;
    expect(server.keepaliveCloses).toHaveLength(1);
  });

  it('fails the connection on an oversize length word and on a truncated frame, without crashing', async () => {
    const a = await open();
    const pendingA = a.conn.getHostname(AbortSignal.timeout(10_000)).then(
      () => undefined,
      (e: unknown) => e,
    );
    a.server.faults.gate('connect_get_hostname');
    const huge = Buffer.alloc(28);
    huge.writeUInt32BE(FRAME_MAX + 1, 0);
    a.session.writeRaw(huge);
    const reasonA = await new Promise<Error>((resolve) => a.conn.onClose(resolve));
    expect(reasonA).toBeInstanceOf(LibvirtProtocolError);
    expect(await pendingA).toBeInstanceOf(ConnectionLostError);

    const b = await open();
    b.server.faults.gate('connect_get_hostname');
    const pendingB = b.conn.getHostname(sig()).then(
      () => undefined,
      (e: unknown) => e,
    );
    await waitFor(() => b.session.inFlight === 1, 'the call to reach the fake');
    const frame = encodeFrame({ prog: REMOTE_PROGRAM, proc: 59, type: 1, serial: 4, status: 0 }, Buffer.alloc(40));
    b.session.writeRaw(frame.subarray(0, 30));
    b.session.stream.end();
    const reasonB = await new Promise<Error>((resolve) => b.conn.onClose(resolve));
    expect(reasonB).toBeInstanceOf(LibvirtProtocolError);
    expect((await pendingB) as ConnectionLostError).toMatchObject({ mayHaveExecuted: true });
  });

  it('drops replies and stream packets for unknown serials', async () => {
    const { conn, session } = await open();
    session.writeRaw(encodeFrame({ prog: REMOTE_PROGRAM, proc: 59, type: MessageType.REPLY, serial: 9999, status: 0 }, Buffer.alloc(8)));
    session.writeRaw(encodeFrame({ prog: REMOTE_PROGRAM, proc: 208, type: MessageType.STREAM, serial: 4242, status: 0 }));
    session.writeRaw(encodeFrame({ prog: 0x1234, proc: 1, type: MessageType.REPLY, serial: 1, status: 0 }));
    expect(await conn.getType(sig())).toBe('QEMU');
    expect(conn.closed).toBe(false);
  });

  it('rejects a reply with a bad optional flag as a protocol error and keeps the connection', async () => {
    const { conn, server } = await open();
    server.faults.rewriteNext('domain_lookup_by_name', (payload) => {
      const bad = Buffer.from(payload);
      bad.writeUInt32BE(2, 8); // remote_error.message flag
      return bad;
    });
    await expect(conn.domainLookupByName('missing', sig())).rejects.toBeInstanceOf(LibvirtProtocolError);
    server.faults.rewriteNext('storage_pool_get_info', (payload) => Buffer.concat([payload, Buffer.alloc(4)]));
    const pool = await conn.storagePoolLookupByName('default', sig());
    await expect(conn.storagePoolGetInfo(pool, sig())).rejects.toMatchObject({ code: 'ERR_LIBVIRT_PROTOCOL' });
    expect(await conn.getType(sig())).toBe('QEMU');
  });

  it('close() sends CONNECT_CLOSE once, is idempotent and reports a client close', async () => {
    const { conn, server } = await open();
    const reasons: Error[] = [];
    conn.onClose((r) => reasons.push(r));
    await Promise.all([conn.close(), conn.close()]);
    await conn.close();
    expect(server.requests.filter((r) => r.name === 'connect_close')).toHaveLength(1);
    expect(conn.closed).toBe(true);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toBeInstanceOf(ConnectionClosedError);
    await waitFor(() => server.sessions.size === 0, 'the fake to see the close');
  });
});

describe('streams', () => {
  async function withVolume(h: FakeHarness, name: string) {
    const pool = await h.conn.storagePoolLookupByName('default', sig());
    return h.conn.storageVolCreateXml(pool, `<volume><name>${name}</name><capacity unit='M'>4</capacity></volume>`, 0, sig());
  }

  it('streams more than 1 MiB in chunks of at most 262120 bytes, byte for byte', async () => {
    const h = await open();
    const vol = await withVolume(h, 'up.img');
    const data = randomBytes(1_500_000);
    const source = Readable.from([data.subarray(0, 700_000), data.subarray(700_000)]);
    const result = await h.conn.storageVolUpload(vol, source, {}, sig());
    expect(result.bytes).toBe(data.length);
    expect(h.server.state.volume('default', 'up.img').content.equals(data)).toBe(true);
    expect(h.server.uploads).toMatchObject([{ vol: 'up.img', bytes: data.length, aborted: false }]);
    expect(h.server.uploads[0]!.maxPacket).toBeLessThanOrEqual(262_120);
    const info = await h.conn.storageVolGetInfo(vol, sig());
    expect(info.allocation).toBe(data.length);
  });

  it('stops on a mid-stream STREAM ERROR, rejects with it and ignores the stray STREAM OK', async () => {
    const h = await open();
    const vol = await withVolume(h, 'err.img');
    h.server.faults.failNextUploadAfter(300_000);
    let pulled = 0;
    async function* source() {
      for (let i = 0; i < 100; i++) {
        pulled++;
        yield Buffer.alloc(100_000, i);
      }
    }
    const err = await h.conn.storageVolUpload(vol, source(), {}, sig()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LibvirtError);
    expect(err).toMatchObject({ libvirtCode: 38, libvirtDomain: 38 });
    expect(pulled).toBeLessThan(100);
    expect(await h.conn.getType(sig())).toBe('QEMU');
    expect(h.conn.stats().streams).toBe(0);
  });

  it('downloads a volume in order, with a slow async sink pausing the connection', async () => {
    const h = await open();
    const vol = await withVolume(h, 'down.img');
    const data = randomBytes(1_000_000);
    h.server.state.volume('default', 'down.img').content = data;
    const fast: Buffer[] = [];
    expect(await h.conn.storageVolDownload(vol, (c) => void fast.push(c), {}, sig())).toEqual({ bytes: data.length });
    expect(Buffer.concat(fast).equals(data)).toBe(true);
    const slow: Buffer[] = [];
    const sink = async (c: Buffer): Promise<void> => {
      slow.push(c);
      await new Promise((r) => setImmediate(r));
    };
    expect(await h.conn.storageVolDownload(vol, sink, { offset: 10, length: 600_000 }, sig())).toEqual({ bytes: 600_000 });
    expect(Buffer.concat(slow).equals(data.subarray(10, 600_010))).toBe(true);
    expect(h.conn.stats().streams).toBe(0);
    // A sink that throws abandons the stream and rejects with its error; the connection stays usable.
    const boom = new Error('disk full');
    await expect(h.conn.storageVolDownload(vol, () => Promise.reject(boom), {}, sig())).rejects.toBe(boom);
    expect(await h.conn.getType(sig())).toBe('QEMU');
  });

  it('an upload longer than `length` fails with the daemon error', async () => {
    const h = await open();
    const vol = await withVolume(h, 'len.img');
    await expect(h.conn.storageVolUpload(vol, [Buffer.alloc(1000)], { length: 100 }, sig())).rejects.toMatchObject({ libvirtCode: 38 });
  });

  it('an aborted upload sends STREAM ERROR and rejects at once', async () => {
    const h = await open();
    const vol = await withVolume(h, 'abort.img');
    const ac = new AbortController();
    let release!: () => void;
    const never = new Promise<void>((r) => (release = r));
    async function* source() {
      yield Buffer.alloc(1000, 1);
      ac.abort(new Error('user abort'));
      await never;
      yield Buffer.alloc(1000, 2);
    }
    await expect(h.conn.storageVolUpload(vol, source(), {}, ac.signal)).rejects.toMatchObject({ name: 'AbortError' });
    await waitFor(() => h.server.uploads.length === 1, 'the fake to see the abort');
    expect(h.server.uploads[0]).toMatchObject({ aborted: true, bytes: 1000 });
    expect(h.server.state.volume('default', 'abort.img').content.length).toBe(0);
    release();
  });
});
