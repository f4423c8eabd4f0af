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
 *   banner-then-silent  sends an OpenSSH banner, reads what the client sends, and never starts the key exchange
 *   auth-silent         key exchange as usual; every authentication request is left without an answer
 *
 * Hostile knobs: a `libvirt` streamlocal target with `ignoreFlowControl` grants the client a 4 GiB
 * channel window and writes without regard to the client's (as a peer that does not follow flow
 * control would); `stopReadingTcp()` stops reading every client socket at the TCP level.
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

export type FakeSshBehaviour = 'ok' | 'reject-auth' | 'close-after-banner' | 'silent' | 'banner-then-silent' | 'auth-silent';

export type StreamlocalTarget =
  { kind: 'socket'; path: string } | { kind: 'libvirt'; server: FakeLibvirtServer; ignoreFlowControl?: boolean } | { kind: 'reject' };

/** ssh2's per-channel flow-control state (not in its typings). */
interface ChannelInternals {
  outgoing: { id: number; window: number };
  _client: { _protocol: { channelWindowAdjust(chan: number, amount: number): void } };
}

/** ssh2's host keys of a server connection, by type: one object shared by every connection of the server. */
interface ConnectionInternals {
  _protocol: { _hostKeys: Record<string, ParsedKey> };
}

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
  hostKey: SshKeyPair = generateKeyPair();
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

  /** The server sockets of the client connections, newest last. */
  get clientSockets(): net.Socket[] {
    return [...this.sockets];
  }

  /** Stops reading every client socket (what the client writes stays in the kernel's buffers, then in its own). */
  stopReadingTcp(): void {
    for (const s of this.sockets) s.pause();
  }

  /**
   * Swaps the server's host key for a new one and re-keys every live connection with it (a host
   * whose key changed under a connection); later connections get the new key too (ssh2 shares one
   * host key table between a server's connections, so it needs a live connection to reach it).
   */
  changeHostKey(): void {
    if (this.clients.size === 0) throw new Error('changeHostKey needs a live connection');
    this.hostKey = generateKeyPair();
    const parsed = ssh2.utils.parseKey(this.hostKey.privateKey) as ParsedKey;
    for (const c of this.clients) {
      (c as unknown as ConnectionInternals)._protocol._hostKeys[parsed.type] = parsed;
      c.rekey();
    }
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
      case 'banner-then-silent':
        sock.write(`SSH-2.0-${IDENT}\r\n`);
        sock.once('data', () => this.emit({ type: 'silent-data' }));
        sock.resume();
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
      if (this.behaviour === 'auth-silent') {
        this.emit({ type: 'auth', user: ctx.username });
        return; // never accepted nor rejected
      }
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
          const channel = accept();
          if (target.ignoreFlowControl) {
            const internals = channel as unknown as ChannelInternals;
            internals._client._protocol.channelWindowAdjust(internals.outgoing.id, 0xffffffff - 2 * 1024 * 1024);
            internals.outgoing.window = Number.MAX_SAFE_INTEGER;
          }
          target.server.serve(channel);
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
