/**
 * SSH dial on ssh2: our own TCP connect (stage `tcp`), then the SSH handshake over that socket
 * with host key verification against known_hosts and public key authentication (stage
 * `ssh-handshake`). The caller's AbortSignal bounds both; an abort tears the socket down.
 */
import net from 'node:net';
import ssh2, { type ConnectConfig, type ServerHostKeyAlgorithm } from 'ssh2';
import { EgressError } from '../../errors.ts';
import type { Logger } from '../../logging.ts';
import { DialError, sshErrorStage, type HostKeyRefusal } from '../dial.ts';
import { hostKeyAlgorithmsFor, knownHostsName, verifyHostKey } from './known-hosts.ts';
import type { SshMaterial } from './material.ts';
import { SshSession } from './session.ts';
import { dialStage } from '../dial-span.ts';

export interface SshTarget {
  name: string;
  address: string;
  port: number;
  user: string;
  insecureIgnoreHostKey: boolean;
}

export interface SshConnectOptions {
  logger: Logger;
  /** Bound on the TCP connect. Default 10 000 ms. */
  connectTimeoutMs?: number;
  /** Bound on the SSH handshake (ssh2 readyTimeout). Default 20 000 ms. */
  readyTimeoutMs?: number;
  /** SSH keepalive interval. Default 15 000 ms; 0 turns it off. */
  keepaliveIntervalMs?: number;
  /** Unanswered SSH keepalives before the link is declared dead. Default 3. */
  keepaliveCountMax?: number;
  /** Bytes the socket may hold unwritten before the peer counts as not reading and is dropped. Default 34 MiB. */
  maxUnwrittenBytes?: number;
}

export const DEFAULT_SSH_KEEPALIVE_INTERVAL_MS = 15_000;
/** As the libvirt write queue's bound: a largest libvirt frame plus room for what is queued behind it. */
export const DEFAULT_SSH_MAX_UNWRITTEN_BYTES = 34 * 1024 * 1024;

/** The server ended the connection before SSH was ready, without an error of its own. */
export class SshHandshakeClosedError extends EgressError {
  constructor(target: string) {
    super('ERR_KVM_SSH_HANDSHAKE_CLOSED', `SSH connection to ${target} closed before the handshake completed`, { retryable: true });
  }
}

/** TCP connect to address:port; rejects with the socket error, a timeout, or the abort reason. */
export function connectTcp(address: string, port: number, timeoutMs: number, signal: AbortSignal): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(toReason(signal.reason));
      return;
    }
    const sock = net.connect({ host: address, port });
    const cleanup = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      sock.removeListener('error', onError);
      sock.removeListener('connect', onConnect);
    };
    const fail = (err: Error): void => {
      cleanup();
      sock.destroy();
      reject(err);
    };
    const onError = (err: Error): void => fail(err);
    const onAbort = (): void => fail(toReason(signal.reason));
    const onConnect = (): void => {
      cleanup();
      sock.setNoDelay(true);
      resolve(sock);
    };
    const timer = setTimeout(() => fail(new TcpConnectTimeoutError(address, port, timeoutMs)), timeoutMs);
    sock.once('error', onError);
    sock.once('connect', onConnect);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export class TcpConnectTimeoutError extends EgressError {
  constructor(address: string, port: number, timeoutMs: number) {
    super('ERR_KVM_TCP_TIMEOUT', `TCP connect to ${address}:${port} timed out after ${timeoutMs} ms`, { retryable: true });
  }
}

function toReason(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason));
}

/**
 * Connects and authenticates. Failures are DialErrors: `tcp` before the TCP connection is up,
 * `ssh-handshake` after (by ssh2's err.level and the sequence).
 */
export async function connectSsh(target: SshTarget, material: SshMaterial, signal: AbortSignal, options: SshConnectOptions): Promise<SshSession> {
  let sock: net.Socket;
  try {
    sock = await dialStage(
      'tcp',
      target.name,
      () => connectTcp(target.address, target.port, options.connectTimeoutMs ?? 10_000, signal),
      (err) => new DialError('tcp', target.name, err),
    );
  } catch (err) {
    throw err instanceof DialError ? err : new DialError('tcp', target.name, err);
  }
  const refusal: { hostKey?: HostKeyRefusal } = {};
  // ssh2's error stays the cause, message unchanged; the host key verdict rides along.
  return dialStage(
    'ssh-handshake',
    target.name,
    () => handshake(sock, target, material, signal, options, refusal),
    (err) => new DialError(sshErrorStage(err, true), target.name, err, refusal),
  );
}

function handshake(
  sock: net.Socket,
  target: SshTarget,
  material: SshMaterial,
  signal: AbortSignal,
  options: SshConnectOptions,
  refusal: { hostKey?: HostKeyRefusal },
): Promise<SshSession> {
  const describe = `${target.address}:${target.port}`;
  const hostName = knownHostsName(target.address, target.port);
  const log = options.logger;

  const config: ConnectConfig = {
    sock,
    username: target.user,
    privateKey: material.privateKey,
    tryKeyboard: false,
    readyTimeout: options.readyTimeoutMs ?? 20_000,
    keepaliveInterval: options.keepaliveIntervalMs ?? DEFAULT_SSH_KEEPALIVE_INTERVAL_MS,
    keepaliveCountMax: options.keepaliveCountMax ?? 3,
  };
  if (target.insecureIgnoreHostKey || !material.knownHosts) {
    log.warn({ host: target.name, address: describe }, 'SSH host key verification is DISABLED for this host (insecureIgnoreHostKey)');
    config.hostVerifier = () => true;
  } else {
    const entries = material.knownHosts;
    const algorithms = hostKeyAlgorithmsFor(entries, hostName);
    if (algorithms) config.algorithms = { serverHostKey: algorithms as ServerHostKeyAlgorithm[] };
    config.hostVerifier = (key: Buffer): boolean => {
      const verdict = verifyHostKey(entries, hostName, key);
      if (verdict.ok) return true;
      refusal.hostKey = { reason: verdict.reason, knownHostsName: hostName, keyType: verdict.keyType, fingerprint: verdict.fingerprint };
      log.warn(
        { host: target.name, knownHostsName: hostName, reason: verdict.reason, keyType: verdict.keyType, fingerprint: verdict.fingerprint },
        'SSH host key refused: it is not the key known_hosts lists for this host',
      );
      return false;
    };
  }

  const client = new ssh2.Client();
  return new Promise<SshSession>((resolve, reject) => {
    let settled = false;
    const settle = (err: Error | undefined): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      client.removeListener('ready', onReady);
      client.removeListener('error', onError);
      client.removeListener('close', onClose);
      if (err) {
        client.on('error', () => undefined); // late errors of a client we are abandoning
        client.destroy();
        sock.destroy();
        reject(err);
      } else {
        resolve(session!);
      }
    };
    let session: SshSession | undefined;
    const onReady = (): void => {
      session = new SshSession(client, describe, { socket: sock, maxUnwrittenBytes: options.maxUnwrittenBytes ?? DEFAULT_SSH_MAX_UNWRITTEN_BYTES });
      settle(undefined);
    };
    const onError = (err: Error): void => settle(err);
    const onClose = (): void => settle(new SshHandshakeClosedError(describe));
    const onAbort = (): void => settle(toReason(signal.reason));
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    client.once('ready', onReady);
    client.on('error', onError);
    client.once('close', onClose);
    try {
      client.connect(config);
    } catch (err) {
      settle(toReason(err));
    }
  });
}
