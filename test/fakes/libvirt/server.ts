/**
 * In-process fake libvirt daemon speaking the real remote protocol with the client's own codec.
 *
 * Serve it on a temporary unix socket (`listen()`), or hand it any Duplex (`serve(stream)`: an
 * ssh2 streamlocal channel, one end of an in-memory pair). One FakeLibvirtState is shared by all
 * connections of a server; per connection the cost is a frame decoder, a few maps and, only
 * after CONNECT_SUPPORTS_FEATURE(10), one ping timer.
 *
 * Deviations from libvirtd 9.0.0 (deliberate, keep in mind when a test passes here only):
 * - Procedures outside the client's table (plus STORAGE_VOL_DOWNLOAD) answer 39/7 "unknown
 *   procedure"; no QEMU/LXC programs, no fd passing, no sparse streams (STREAM_HOLE).
 * - XML is not parsed or validated: only <name>, <uuid>, <memory>, <vcpu>, <capacity>, <path>
 *   are picked out; the XML is stored verbatim and returned as is by GET_XML_DESC.
 * - Calls execute synchronously on receipt; delays and gates hold only the REPLY (so a held
 *   call has already executed, like a daemon whose reply was lost).
 * - One driver flavour per server ('qemu' or 'test', for error numbers and upload support),
 *   whatever URI is opened; the test driver's per-connection private state is not modelled.
 * - Pool capacity is a fixed number; allocation is the sum of the volumes' content bytes.
 * - Domain ids grow from 1; undefine of a running domain makes it transient (like libvirt).
 * - There is no guest OS: DOMAIN_SHUTDOWN powers the domain off at once (shutoff, reason 1).
 * - Polkit: AUTH_POLKIT succeeds or fails by the `polkitAllowed` option, with no polkitd.
 * - Server PINGs: checked every `keepalive.intervalMs`, so the first PING comes after one to two
 *   intervals of silence (libvirtd is exact to the interval).
 * - Client frames with an invalid length close the connection at once.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { FakeFaults } from './faults.ts';
import { FakeLibvirtState, type FakeDriver } from './model.ts';
import { FakeSession } from './session.ts';

export interface FakeLibvirtServerOptions {
  /** Error flavour and upload support. Default 'qemu'. */
  driver?: FakeDriver;
  /** AUTH_LIST answer. Default [0] (none); [2] exercises AUTH_POLKIT; [1] is SASL only. */
  authTypes?: number[];
  /** Whether AUTH_POLKIT succeeds. Default true. */
  polkitAllowed?: boolean;
  /** Stop reading a connection while this many calls are in flight (libvirtd: 5). */
  maxClientRequests?: number;
  /** Server pings after CONNECT_SUPPORTS_FEATURE(10); libvirtd uses 5000 ms and 5. `false` = none. */
  keepalive?: { intervalMs: number; count: number } | false;
  hostname?: string;
  /** Requests kept in `requests` (oldest dropped). Default 1000. */
  requestLogLimit?: number;
}

export interface RequestRecord {
  session: number;
  serial: number;
  proc: number;
  name: string;
  args: unknown;
}

export interface UploadRecord {
  session: number;
  serial: number;
  vol: string;
  bytes: number;
  /** Largest STREAM data packet received. */
  maxPacket: number;
  aborted: boolean;
}

type ResolvedOptions = Required<FakeLibvirtServerOptions>;

export class FakeLibvirtServer {
  readonly options: ResolvedOptions;
  readonly state: FakeLibvirtState;
  readonly faults = new FakeFaults();
  readonly sessions = new Set<FakeSession>();
  readonly requests: RequestRecord[] = [];
  readonly uploads: UploadRecord[] = [];
  readonly keepaliveCloses: number[] = [];
  nextCallbackId = 1;
  /** Unix socket path once listening. */
  socketPath: string | undefined;
  private nextSessionId = 1;
  private netServer: net.Server | undefined;
  private dir: string | undefined;
  private readonly sessionWaiters: ((s: FakeSession) => void)[] = [];

  constructor(options: FakeLibvirtServerOptions = {}) {
    this.options = {
      driver: options.driver ?? 'qemu',
      authTypes: options.authTypes ?? [0],
      polkitAllowed: options.polkitAllowed ?? true,
      maxClientRequests: options.maxClientRequests ?? 5,
      keepalive: options.keepalive ?? { intervalMs: 5_000, count: 5 },
      hostname: options.hostname ?? 'fake-libvirt-host',
      requestLogLimit: options.requestLogLimit ?? 1_000,
    };
    this.state = new FakeLibvirtState(this.options.driver);
    this.state.addPool({ name: 'default' });
    this.state.onLifecycle = (dom, event, detail) => {
      for (const s of this.sessions) s.lifecycle(dom, event, detail);
    };
  }

  /** Serves one connection on any Duplex. */
  serve(stream: Duplex): FakeSession {
    const session = new FakeSession(this.nextSessionId++, stream, this);
    this.sessions.add(session);
    for (const w of this.sessionWaiters.splice(0)) w(session);
    return session;
  }

  /** Resolves with the next session to connect (or the newest one when `existing` is true and there is one). */
  nextSession(existing = false): Promise<FakeSession> {
    const last = [...this.sessions].at(-1);
    if (existing && last) return Promise.resolve(last);
    return new Promise((resolve) => this.sessionWaiters.push(resolve));
  }

  /** Listens on a unix socket in a fresh temporary directory; returns its path. */
  async listen(): Promise<string> {
    this.dir = await mkdtemp(join(tmpdir(), 'fake-libvirt-'));
    const path = join(this.dir, 'libvirt-sock');
    this.netServer = net.createServer((sock) => this.serve(sock));
    await new Promise<void>((resolve, reject) => {
      this.netServer!.once('error', reject);
      this.netServer!.listen(path, resolve);
    });
    this.socketPath = path;
    return path;
  }

  /** A connected unix socket to this server (after `listen()`). */
  async connect(): Promise<net.Socket> {
    if (!this.socketPath) throw new Error('fake libvirt server is not listening');
    const sock = net.connect(this.socketPath);
    await new Promise<void>((resolve, reject) => {
      sock.once('connect', resolve);
      sock.once('error', reject);
    });
    return sock;
  }

  /** Destroys every connection, stops listening, removes the socket directory. */
  async close(): Promise<void> {
    this.faults.reset();
    for (const s of [...this.sessions]) s.destroy();
    if (this.netServer) await new Promise<void>((resolve) => this.netServer!.close(() => resolve()));
    this.netServer = undefined;
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }

  // ---- used by sessions ----
  recordRequest(r: RequestRecord): void {
    this.requests.push(r);
    if (this.requests.length > this.options.requestLogLimit) this.requests.shift();
  }

  recordUpload(r: UploadRecord): void {
    this.uploads.push(r);
  }

  recordKeepaliveClose(session: number): void {
    this.keepaliveCloses.push(session);
  }

  sessionClosed(s: FakeSession): void {
    this.sessions.delete(s);
  }
}
