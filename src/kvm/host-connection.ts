/**
 * One KVM host connection: an SSH client, one streamlocal channel to libvirt's socket and the
 * libvirt connection over it. The three live and die together: closing closes all of them,
 * and whichever layer dies first is reported once as the reason.
 *
 * Dial sequence and stages: read key + known_hosts (ssh-material) → TCP connect (tcp) → SSH
 * handshake (ssh-handshake) → streamlocal channel → AUTH_LIST → SUPPORTS_FEATURE → OPEN
 * (libvirt-connect).
 */
import type { ClientChannel } from 'ssh2';
import type { Logger } from '../logging.ts';
import type { KvmHostConfig } from './host-config.ts';
import { openLibvirtConnection } from './libvirt/open.ts';
import type { LibvirtConnection } from './libvirt/connection.ts';
import type { KeepaliveOptions } from './libvirt/keepalive.ts';
import type { LibvirtMetrics } from './libvirt/metrics.ts';
import { CloseLatch } from './close-latch.ts';
import { asDialError, DialError } from './dial.ts';
import { dialStage } from './dial-span.ts';
import { withSpan } from '../telemetry/spans.ts';
import { connectSsh, type SshConnectOptions } from './ssh/connect.ts';
import { loadSshMaterial } from './ssh/material.ts';
import { SshClosedError, type SshSession } from './ssh/session.ts';
import { openStreamLocal } from './ssh/streamlocal.ts';

export class HostConnection {
  private readonly latch = new CloseLatch();
  private closing: Promise<void> | undefined;
  private clientClosing = false;

  constructor(
    /** The host's configured name. */
    readonly host: string,
    readonly libvirt: LibvirtConnection,
    private readonly channel: ClientChannel,
    private readonly ssh: SshSession,
  ) {
    libvirt.onClose((reason) => this.died(reason));
    ssh.onClose((reason) => this.died(reason));
    channel.on('error', (err: Error) => this.died(err));
    channel.on('close', () =>
      this.died(this.clientClosing ? this.closedByClient() : new SshClosedError(`streamlocal channel to libvirt on ${ssh.describe} closed`)),
    );
  }

  get closed(): boolean {
    return this.latch.closed;
  }

  /** Why the connection closed, once it has. */
  get closeReason(): Error | undefined {
    return this.latch.reason;
  }

  /** `listener` hears the close reason once (asynchronously at once when already closed). */
  onClose(listener: (reason: Error) => void): void {
    this.latch.onClose(listener);
  }

  /** CONNECT_CLOSE (bounded by the libvirt client), then the channel and the SSH client. Never rejects. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.clientClosing = true;
      try {
        await this.libvirt.close();
      } finally {
        this.died(this.closedByClient());
      }
    })();
    return this.closing;
  }

  /** Immediate teardown of all three layers. */
  destroy(err?: Error): void {
    const reason = err ?? new SshClosedError(`connection to ${this.host} destroyed by the client`);
    this.died(reason);
  }

  private closedByClient(): Error {
    return this.libvirt.closeReason ?? new SshClosedError(`connection to ${this.host} closed by the client`);
  }

  private died(reason: Error): void {
    this.latch.close(reason, () => {
      this.libvirt.destroy(reason);
      this.channel.destroy();
      if (this.clientClosing) this.ssh.end();
      else this.ssh.destroy(reason);
    });
  }
}

export interface DialHostOptions {
  logger: Logger;
  /** The libvirt client's RPC metrics. */
  libvirtMetrics?: LibvirtMetrics;
  /** The libvirt client's keepalive (default on). */
  keepalive?: KeepaliveOptions | false;
  /** Calls in flight per libvirt connection (default 4). */
  maxInFlight?: number;
  /** Bytes waiting to be written past which the peer counts as not reading and is dropped (default 34 MiB). */
  maxQueuedBytes?: number;
  /** SSH timeouts and keepalive; logger comes from `logger`. */
  ssh?: Omit<SshConnectOptions, 'logger'>;
}

/** Dials a host; a failure is a DialError tagged with the stage it failed in. */
export function dialHost(host: KvmHostConfig, signal: AbortSignal, options: DialHostOptions): Promise<HostConnection> {
  return withSpan('kvm dial', { 'egress.kvm.host': host.name, 'server.address': host.address, 'server.port': host.port }, () => dial(host, signal, options));
}

async function dial(host: KvmHostConfig, signal: AbortSignal, options: DialHostOptions): Promise<HostConnection> {
  const logger = options.logger.child({ host: host.name, address: `${host.address}:${host.port}`, user: host.user });
  const material = await dialStage(
    'ssh-material',
    host.name,
    () => loadSshMaterial(host, signal),
    (err) => asDialError('ssh-material', host.name, err),
  );
  const ssh = await connectSsh(host, material, signal, { ...options.ssh, logger });
  return dialStage(
    'libvirt-connect',
    host.name,
    () => openLibvirt(host, ssh, signal, options, logger),
    (err) => asDialError('libvirt-connect', host.name, err),
  );
}

async function openLibvirt(host: KvmHostConfig, ssh: SshSession, signal: AbortSignal, options: DialHostOptions, logger: Logger): Promise<HostConnection> {
  let channel: ClientChannel | undefined;
  try {
    channel = await openStreamLocal(ssh, host.socketPath, signal);
    const libvirt = await openLibvirtConnection(channel, {
      uri: host.uri,
      signal,
      logger,
      ...(options.libvirtMetrics ? { metrics: options.libvirtMetrics } : {}),
      ...(options.keepalive !== undefined ? { keepalive: options.keepalive } : {}),
      ...(options.maxInFlight !== undefined ? { maxInFlight: options.maxInFlight } : {}),
      ...(options.maxQueuedBytes !== undefined ? { maxQueuedBytes: options.maxQueuedBytes } : {}),
    });
    const conn = new HostConnection(host.name, libvirt, channel, ssh);
    if (ssh.closed) conn.destroy(ssh.closeReason);
    return conn;
  } catch (err) {
    channel?.destroy();
    ssh.destroy();
    throw new DialError('libvirt-connect', host.name, err);
  }
}

/** A dial function for the host pool. */
export function hostDialer(options: DialHostOptions): (host: KvmHostConfig, signal: AbortSignal) => Promise<HostConnection> {
  return (host, signal) => dialHost(host, signal, options);
}
