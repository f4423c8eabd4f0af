import type { Socket } from 'node:net';
import { Writable, type Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { openLibvirtConnection, type LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { WriteQueue } from '../../src/kvm/libvirt/write-queue.ts';
import { remoteErrorCodec } from '../../src/kvm/libvirt/codecs.ts';
import { MessageType, Proc, REMOTE_PROGRAM } from '../../src/kvm/libvirt/constants.ts';
import { encodeFrame, FrameDecoder, type Frame } from '../../src/kvm/libvirt/frame.ts';
import { decodeXdr, encodeXdr } from '../../src/kvm/libvirt/xdr.ts';
import { silentLogger } from '../../src/logging.ts';
import { duplexPair } from '../fakes/libvirt/duplex-pair.ts';
import { openOnFake, waitFor, type FakeHarness } from '../fakes/libvirt/harness.ts';
import { FakeLibvirtServer } from '../fakes/libvirt/server.ts';

const sig = (): AbortSignal => AbortSignal.timeout(20_000);
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});
function track(h: FakeHarness): FakeHarness {
  cleanup.push(async () => {
    h.conn.destroy();
    await h.server.close();
  });
  return h;
}

describe('writes', () => {
  it('WriteQueue writes nothing more once the stream asks for drain', async () => {
    const written: Buffer[] = [];
    const callbacks: (() => void)[] = [];
    const sink = new Writable({
      highWaterMark: 4,
      write(chunk: Buffer, _enc, cb) {
        written.push(chunk);
        callbacks.push(() => cb());
      },
    });
    const duplexLike = sink as unknown as Duplex;
    const q = new WriteQueue(duplexLike);
    let firstDone = false;
    const first = q.pushAndWait(Buffer.alloc(8, 1)).then(() => (firstDone = true));
    q.push(Buffer.alloc(8, 2));
    q.push(Buffer.alloc(8, 3));
    expect(written).toHaveLength(1);
    expect(sink.writableLength).toBe(8);
    expect(firstDone).toBe(false);
    callbacks.shift()!();
    await first;
    await waitFor(() => written.length === 2, 'the second frame after drain');
    expect(written.map((b) => b[0])).toEqual([1, 2]);
    callbacks.shift()!();
    await waitFor(() => written.length === 3, 'the third frame after drain');
    callbacks.shift()!();
  });

  it('an upload stops pulling its source while the daemon does not read', async () => {
    const h = track(await openOnFake());
    const pool = await h.conn.storagePoolLookupByName('default', sig());
    const vol = await h.conn.storageVolCreateXml(pool, '<volume><name>bp.img</name></volume>', 0, sig());
    const gate = h.server.faults.gate('storage_vol_upload');
    const chunk = 256 * 1024;
    const total = 16 * 1024 * 1024;
    let pulled = 0;
    function* source() {
      for (let sent = 0; sent < total; sent += chunk) {
        pulled += chunk;
        yield Buffer.alloc(chunk, (sent / chunk) % 251);
      }
    }
    const upload = h.conn.storageVolUpload(vol, source(), {}, sig());
    upload.catch(() => undefined);
    // The daemon answers the CALL, then stops reading the socket.
    await gate.untilHeld(1);
    h.session.stream.pause();
    gate.release();
    const clientSock = h.conn['core'].stream as Socket;
    await waitFor(() => clientSock.writableNeedDrain, 'the client socket to fill');
    // Let the event loop turn: an upload ignoring backpressure would pull everything by now.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(pulled).toBeLessThanOrEqual(2 * 1024 * 1024);
    h.session.stream.resume();
    expect(await upload).toEqual({ bytes: total });
    const content = h.server.state.volume('default', 'bp.img').content;
    expect(content.length).toBe(total);
    expect(content[total - 1]).toBe((total / chunk - 1) % 251);
  });
});

describe('serials and the fake protocol checks', () => {
  it('wraps the serial counter past 2^32 - 1 without using 0', async () => {
    const h = track(await openOnFake());
    (h.conn['core'] as unknown as { calls: { nextSerial: number } }).calls.nextSerial = 0xffff_ffff;
    expect(await h.conn.getType(sig())).toBe('QEMU');
    expect(await h.conn.getHostname(sig())).toBe('fake-libvirt-host');
    expect(h.server.requests.slice(-2).map((r) => r.serial)).toEqual([0xffff_ffff, 1]);
  });

  it('the fake echoes any serial, refuses calls before AUTH_LIST and rejects trailing argument bytes', async () => {
    const server = new FakeLibvirtServer();
    cleanup.push(() => server.close());
    await server.listen();
    const sock = await server.connect();
    cleanup.push(() => void sock.destroy());
    const decoder = new FrameDecoder();
    const replies: Frame[] = [];
    sock.on('data', (chunk: Buffer) => replies.push(...decoder.push(chunk)));
    const call = (serial: number, proc: number, payload?: Buffer): boolean =>
      sock.write(encodeFrame({ prog: REMOTE_PROGRAM, proc, type: MessageType.CALL, serial, status: 0 }, payload));
    call(0xdead_beef, Proc.CONNECT_GET_TYPE);
    call(77, Proc.AUTH_LIST);
    call(78, Proc.CONNECT_SUPPORTS_FEATURE, Buffer.concat([encodeXdr(10, (w, v) => w.int(v)), Buffer.alloc(4)]));
    call(79, 9999);
    await waitFor(() => replies.length === 4, 'four replies');
    const err = (f: Frame) => decodeXdr(f.payload, remoteErrorCodec.read);
    expect(replies.map((f) => [f.serial, f.status])).toEqual([
      [0xdead_beef, 1],
      [77, 0],
      [78, 1],
      [79, 1],
    ]);
    expect(err(replies[0]!)).toMatchObject({ code: 39, domain: 7, message: 'authentication required' });
    expect(err(replies[2]!)).toMatchObject({ code: 39, domain: 7 });
    expect(err(replies[3]!)).toMatchObject({ code: 39, domain: 7, message: 'unknown procedure: 9999' });
  });
});

describe('fake server knobs and scale', () => {
  it('delays replies of one procedure without holding others', async () => {
    const h = track(await openOnFake());
    h.server.faults.delay('connect_get_type', 30);
    const order: string[] = [];
    await Promise.all([h.conn.getType(sig()).then(() => order.push('type')), h.conn.getHostname(sig()).then(() => order.push('hostname'))]);
    expect(order).toEqual(['hostname', 'type']);
  });

  it('an open aborted by its signal rejects with the abort reason and destroys the stream', async () => {
    const server = new FakeLibvirtServer();
    cleanup.push(() => server.close());
    server.faults.gate('connect_open');
    const [client, serverEnd] = duplexPair();
    const session = server.serve(serverEnd);
    const ac = new AbortController();
    const opening = openLibvirtConnection(client, { uri: 'qemu:///system', signal: ac.signal, logger: silentLogger() });
    await waitFor(() => session.inFlight === 1 && server.requests.at(-1)?.name === 'connect_open', 'CONNECT_OPEN in flight');
    const reason = new Error('dial deadline');
    ac.abort(reason);
    await expect(opening).rejects.toMatchObject({ name: 'AbortError', cause: reason });
    expect(client.destroyed).toBe(true);
    await waitFor(() => server.sessions.size === 0, 'the fake to see the stream end');
  });

  it('serves hundreds of connections over in-memory pairs', async () => {
    const server = new FakeLibvirtServer({ keepalive: false });
    cleanup.push(() => server.close());
    const conns: LibvirtConnection[] = await Promise.all(
      Array.from({ length: 300 }, async () => {
        const [client, serverEnd] = duplexPair();
        server.serve(serverEnd);
        return openLibvirtConnection(client, { uri: 'qemu:///system', signal: sig(), logger: silentLogger(), keepalive: false });
      }),
    );
    expect(server.sessions.size).toBe(300);
    const names = await Promise.all(conns.map((c) => c.getHostname(sig())));
    expect(new Set(names).size).toBe(1);
    await Promise.all(conns.map((c) => c.close()));
    await waitFor(() => server.sessions.size === 0, 'all fake sessions to close');
    expect(server.requests.filter((r) => r.name === 'connect_close')).toHaveLength(300);
  });
});
