/**
 * In-process SSH server on 127.0.0.1:0 (ssh2's Server over our own net.Server) that can produce
 * every dial stage and pipes `direct-streamlocal@openssh.com` channels to a unix socket or to
 * the fake libvirt daemon.
 *
 * Behaviours:
 *   ok                  host key + public key auth for the authorised key; streamlocal per `streamlocal`
 *   reject-auth         every authentication attempt is refused
 *   close-after-banner  sends an OpenSSH banner, then closes the TCP connection
 *   silent              accepts TCP and never sends a byte
 *
 * Deviations from OpenSSH 9.2 (deliberate): no shell/exec/sftp, only publickey auth, one host key
 * (ed25519), no MaxStartups/PerSource limits, and streamlocal is allowed or refused as configured
 * rather than by AllowTcpForwarding/AllowStreamLocalForwarding. The ident is OpenSSH-like so that
 * ssh2's strictVendor check passes exactly as against the real sshd.
 */
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ssh2, { type Connection, type ParsedKey } from 'ssh2';
import type { FakeLibvirtServer } from '../libvirt/server.ts';

export type FakeSshBehaviour = 'ok' | 'reject-auth' | 'close-after-banner' | 'silent';

export type StreamlocalTarget = { kind: 'socket'; path: string } | { kind: 'libvirt'; server: FakeLibvirtServer } | { kind: 'reject' };

export interface FakeSshServerOptions {
  behaviour?: FakeSshBehaviour;
  streamlocal?: StreamlocalTarget;
  /** The user allowed to log in. Default 'root'. */
  user?: string;
}

export interface SshKeyPair {
  /** OpenSSH private key text. */
  privateKey: string;
  /** `ssh-ed25519 AAAA…` */
  publicKey: string;
}

/**
 * An ed25519 key pair. ssh2 1.17's generateKeyPairSync emits an unparsable key about once in
 * 250 (a public key whose leading zero byte was dropped, 31 bytes long): such pairs are redrawn.
 */
export function generateKeyPair(): SshKeyPair {
  for (;;) {
    const k = ssh2.utils.generateKeyPairSync('ed25519');
    if (!(ssh2.utils.parseKey(k.private) instanceof Error)) return { privateKey: k.private, publicKey: k.public.trim() };
  }
}

export interface FakeSshEvent {
  /** `silent-data`: a silent server received the client's first bytes (its SSH banner). */
  type: 'tcp-accept' | 'tcp-close' | 'silent-data' | 'auth' | 'ready' | 'streamlocal';
  user?: string;
  accepted?: boolean;
  socketPath?: string;
}

const IDENT = 'OpenSSH_9.2p1 fake-egress';

export class FakeSshServer {
  readonly hostKey: SshKeyPair = generateKeyPair();
  readonly clientKey: SshKeyPair = generateKeyPair();
  readonly events: FakeSshEvent[] = [];
  behaviour: FakeSshBehaviour;
  streamlocal: StreamlocalTarget;
  readonly user: string;
  private readonly net: net.Server;
  private readonly ssh: ssh2.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly clients = new Set<Connection>();
  private readonly eventWaiters: { type: FakeSshEvent['type']; resolve: (e: FakeSshEvent) => void }[] = [];
  private dir: string | undefined;
  port = 0;

  constructor(options: FakeSshServerOptions = {}) {
    this.behaviour = options.behaviour ?? 'ok';
    this.streamlocal = options.streamlocal ?? { kind: 'reject' };
    this.user = options.user ?? 'root';
    this.ssh = new ssh2.Server({ hostKeys: [this.hostKey.privateKey], ident: IDENT }, (client) => this.onClient(client));
    this.net = net.createServer((sock) => this.onSocket(sock));
  }

  async listen(): Promise<number> {
    this.net.listen(0, '127.0.0.1');
    await once(this.net, 'listening');
    this.port = (this.net.address() as net.AddressInfo).port;
    return this.port;
  }

  /** `[127.0.0.1]:port ssh-ed25519 AAAA…` for this server's host key. */
  knownHostsLine(): string {
    return `[127.0.0.1]:${this.port} ${this.hostKey.publicKey.split(' ').slice(0, 2).join(' ')}`;
  }

  /**
   * Writes the client key and a known_hosts file (this server's key unless `knownHosts` is given)
   * into a temp dir; returns their paths.
   */
  async writeMaterial(knownHosts?: string): Promise<{ dir: string; keyFile: string; knownHostsFile: string }> {
    this.dir ??= await mkdtemp(join(tmpdir(), 'fake-ssh-'));
    const keyFile = join(this.dir, 'id_ed25519');
    const knownHostsFile = join(this.dir, `known_hosts-${Math.random().toString(36).slice(2)}`);
    await writeFile(keyFile, this.clientKey.privateKey, { mode: 0o600 });
    await writeFile(knownHostsFile, `${knownHosts ?? this.knownHostsLine()}\n`);
    return { dir: this.dir, keyFile, knownHostsFile };
  }

  /** Resolves with the next event of `type` (or the latest one already seen when `seen` is true). */
  nextEvent(type: FakeSshEvent['type'], seen = false): Promise<FakeSshEvent> {
    const last = seen ? this.events.findLast((e) => e.type === type) : undefined;
    if (last) return Promise.resolve(last);
    return new Promise((resolve) => this.eventWaiters.push({ type, resolve }));
  }

  /** Number of TCP connections accepted so far. */
  get accepted(): number {
    return this.events.filter((e) => e.type === 'tcp-accept').length;
  }

  /** Drops every client connection at the TCP level (a host that vanished). */
  killConnections(): void {
    for (const s of this.sockets) s.destroy();
  }

  async close(): Promise<void> {
    for (const c of this.clients) c.end();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.net.close(() => resolve()));
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }

  private emit(e: FakeSshEvent): void {
    this.events.push(e);
    for (let i = 0; i < this.eventWaiters.length;) {
      const w = this.eventWaiters[i]!;
      if (w.type === e.type) {
        this.eventWaiters.splice(i, 1);
        w.resolve(e);
      } else i++;
    }
  }

  private onSocket(sock: net.Socket): void {
    this.sockets.add(sock);
    // As OpenSSH does: without it, small replies wait on delayed ACKs (~40 ms a round trip).
    sock.setNoDelay(true);
    sock.on('error', () => undefined);
    sock.on('close', () => {
      this.sockets.delete(sock);
      this.emit({ type: 'tcp-close' });
    });
    this.emit({ type: 'tcp-accept' });
    switch (this.behaviour) {
      case 'silent':
        sock.once('data', () => this.emit({ type: 'silent-data' }));
        return;
      case 'close-after-banner':
        sock.end(`SSH-2.0-${IDENT}\r\n`);
        return;
      default:
        this.ssh.injectSocket(sock);
    }
  }

  private onClient(client: Connection): void {
    this.clients.add(client);
    client.on('error', () => undefined);
    client.on('close', () => this.clients.delete(client));
    const allowed = ssh2.utils.parseKey(this.clientKey.publicKey) as ParsedKey;
    client.on('authentication', (ctx) => {
      const ok =
        this.behaviour === 'ok' &&
        ctx.method === 'publickey' &&
        ctx.username === this.user &&
        ctx.key.algo === allowed.type &&
        ctx.key.data.equals(allowed.getPublicSSH());
      if (!ok) {
        this.emit({ type: 'auth', user: ctx.username, accepted: false });
        ctx.reject(['publickey']);
        return;
      }
      if (ctx.signature && ctx.blob) {
        const valid = allowed.verify(ctx.blob, ctx.signature, ctx.hashAlgo);
        this.emit({ type: 'auth', user: ctx.username, accepted: valid === true });
        if (valid === true) ctx.accept();
        else ctx.reject(['publickey']);
      } else {
        ctx.accept(); // key is acceptable; the client signs next
      }
    });
    client.on('ready', () => {
      this.emit({ type: 'ready' });
      client.on('openssh.streamlocal', (accept, reject, info) => {
        this.emit({ type: 'streamlocal', socketPath: info.socketPath });
        const target = this.streamlocal;
        if (target.kind === 'reject') {
          reject();
          return;
        }
        if (target.kind === 'libvirt') {
          target.server.serve(accept());
          return;
        }
        const upstream = net.connect(target.path);
        upstream.once('connect', () => {
          const channel = accept();
          channel.pipe(upstream).pipe(channel);
          channel.on('close', () => upstream.destroy());
          upstream.on('close', () => channel.destroy());
        });
        upstream.on('error', () => reject());
      });
    });
  }
}
