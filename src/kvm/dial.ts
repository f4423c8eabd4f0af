/**
 * Dial stages of a KVM host connection (SSH → streamlocal channel → libvirt) and the error
 * that names the stage a dial failed in.
 *
 *   ssh-material     the private key or known_hosts file is missing, unreadable or unparsable
 *   tcp              the TCP connection to host:port could not be made (refused, unreachable,
 *                    DNS, timeout before any SSH byte)
 *   ssh-handshake    TCP was up but SSH did not become ready: banner, key exchange, host key
 *                    verification, user authentication
 *   libvirt-connect  SSH was ready but libvirt was not: the streamlocal channel to the socket,
 *                    AUTH_LIST, CONNECT_OPEN
 *
 * The stage comes from where in the sequence the dial was and from ssh2's `err.level`, never from
 * an error message.
 */
import { EgressError } from '../errors.ts';

export const DIAL_STAGES = ['ssh-material', 'tcp', 'ssh-handshake', 'libvirt-connect'] as const;
export type DialStage = (typeof DIAL_STAGES)[number];

/**
 * A dial that failed. `message` is the original error's message unchanged; the original error
 * is `cause`. Always retryable: the next caller dials again.
 */
export class DialError extends EgressError {
  readonly stage: DialStage;
  /** The host's configured name. */
  readonly host: string;
  /** Set when the handshake failed because the server's host key was refused. */
  readonly hostKey: HostKeyRefusal | undefined;

  constructor(stage: DialStage, host: string, cause: unknown, details: { hostKey?: HostKeyRefusal; code?: string; message?: string } = {}) {
    super(details.code ?? 'ERR_KVM_DIAL', details.message ?? messageOf(cause), { cause, retryable: true });
    this.stage = stage;
    this.host = host;
    this.hostKey = details.hostKey;
  }
}

/**
 * A dial the host pool ended at its own bound (`dialTimeoutMs`), not the caller: the message names
 * the stage the dial was in and the bound; `cause` is the DialError the dial ended with.
 */
export class DialTimeoutError extends DialError {
  readonly timeoutMs: number;
  constructor(dial: DialError, timeoutMs: number) {
    super(dial.stage, dial.host, dial, {
      code: 'ERR_KVM_DIAL_TIMEOUT',
      message: `dial of KVM host "${dial.host}" timed out after ${timeoutMs} ms in stage ${dial.stage}`,
      ...(dial.hostKey ? { hostKey: dial.hostKey } : {}),
    });
    this.timeoutMs = timeoutMs;
  }
}

/** Why a server host key was refused: not in known_hosts, different from it, or revoked there. */
export interface HostKeyRefusal {
  reason: 'unknown' | 'mismatch' | 'revoked';
  /** The name looked up in known_hosts (`host` or `[host]:port`). */
  knownHostsName: string;
  keyType: string | undefined;
  /** OpenSSH `SHA256:…` fingerprint of the key the server presented. */
  fingerprint: string;
}

function messageOf(cause: unknown): string {
  if (cause instanceof Error) return cause.message;
  if (typeof cause === 'string') return cause;
  return String(cause);
}

/** Wraps `err` as a DialError of `stage` unless it already is one (an inner stage wins). */
export function asDialError(stage: DialStage, host: string, err: unknown): DialError {
  return err instanceof DialError ? err : new DialError(stage, host, err);
}

/**
 * ssh2 tags its errors with `level`. Socket, DNS and timeout errors are a TCP failure while the
 * TCP connection was not yet established and a handshake failure afterwards; handshake,
 * authentication and protocol errors are always the handshake. An error without a level (a
 * server DISCONNECT carries only a reason code) follows the sequence: handshake once TCP is up.
 */
export function sshErrorStage(err: unknown, tcpEstablished: boolean): 'tcp' | 'ssh-handshake' {
  const level = err instanceof Error ? (err as Error & { level?: unknown }).level : undefined;
  switch (level) {
    case 'handshake':
    case 'client-authentication':
    case 'protocol':
    case 'agent':
      return 'ssh-handshake';
    case 'client-socket':
    case 'client-dns':
    case 'client-timeout':
    default:
      return tcpEstablished ? 'ssh-handshake' : 'tcp';
  }
}
