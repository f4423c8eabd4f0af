/**
 * Errors of the libvirt client. Every decision is made from numbers (libvirt's error code and
 * domain, the procedure, whether the connection had authenticated), never from a message.
 */
import { EgressError } from '../../errors.ts';
import { truncateMessage } from '../../health/message.ts';
import { ErrorCode, ErrorDomain, Proc } from './constants.ts';

/** What a caller usually needs to know about a daemon error. */
export type LibvirtErrorKind = 'not-found' | 'exists' | 'invalid-state' | 'auth' | 'access-denied' | 'unsupported' | 'other';

/** The decoded `remote_error` payload (only the fields worth keeping). */
export interface RemoteError {
  /** virErrorNumber. */
  code: number;
  /** virErrorDomain: which part of libvirt raised it. */
  domain: number;
  message: string | null;
  /** 0 none, 1 warning, 2 error. */
  level: number;
  str1: string | null;
  str2: string | null;
  str3: string | null;
  int1: number;
  int2: number;
}

/** Where an error was raised, for classification. */
export interface ErrorContext {
  /** REMOTE_PROGRAM procedure number of the call. */
  procedure?: number;
  /** False while the connection has not finished AUTH_LIST / AUTH_POLKIT. */
  authenticated?: boolean;
}

const NOT_FOUND = new Set<number>([
  ErrorCode.NO_DOMAIN,
  ErrorCode.NO_NETWORK,
  ErrorCode.NO_STORAGE_POOL,
  ErrorCode.NO_STORAGE_VOL,
  ErrorCode.NO_DOMAIN_METADATA,
]);
const EXISTS = new Set<number>([ErrorCode.DOM_EXIST, ErrorCode.STORAGE_VOL_EXIST]);
const DEFINE_PROCS = new Set<number>([11, Proc.DOMAIN_DEFINE_XML_FLAGS]);
const UNSUPPORTED = new Set<number>([ErrorCode.NO_SUPPORT, ErrorCode.OPERATION_UNSUPPORTED, ErrorCode.ARGUMENT_UNSUPPORTED]);
const RETRYABLE = new Set<number>([ErrorCode.OPERATION_TIMEOUT, ErrorCode.RESOURCE_BUSY, ErrorCode.AGENT_UNRESPONSIVE]);

/** Classifies a daemon error by its numbers. */
export function classifyLibvirtError(code: number, domain: number, ctx: ErrorContext = {}): LibvirtErrorKind {
  if (NOT_FOUND.has(code)) return 'not-found';
  if (EXISTS.has(code)) return 'exists';
  // OPERATION_FAILED is generic; on a define it is the "already defined with uuid" refusal.
  if (code === ErrorCode.OPERATION_FAILED && ctx.procedure !== undefined && DEFINE_PROCS.has(ctx.procedure)) return 'exists';
  if (code === ErrorCode.OPERATION_INVALID) return 'invalid-state';
  if (code === ErrorCode.AUTH_FAILED || code === ErrorCode.AUTH_CANCELLED) return 'auth';
  if (code === ErrorCode.ACCESS_DENIED) return 'access-denied';
  if (UNSUPPORTED.has(code)) return 'unsupported';
  if (code === ErrorCode.RPC && domain === ErrorDomain.RPC) {
    // 39/7 is "authentication required" before auth and "unknown procedure" after it.
    return ctx.authenticated === false ? 'auth' : 'unsupported';
  }
  return 'other';
}

const KIND_CODES: Record<LibvirtErrorKind, string> = {
  'not-found': 'ERR_LIBVIRT_NOT_FOUND',
  exists: 'ERR_LIBVIRT_EXISTS',
  'invalid-state': 'ERR_LIBVIRT_INVALID_STATE',
  auth: 'ERR_LIBVIRT_AUTH',
  'access-denied': 'ERR_LIBVIRT_ACCESS_DENIED',
  unsupported: 'ERR_LIBVIRT_UNSUPPORTED',
  other: 'ERR_LIBVIRT',
};

/**
 * An error reported by the daemon. `code` is this project's stable code (one per kind);
 * libvirt's own numbers are `libvirtCode` and `libvirtDomain`.
 */
export class LibvirtError extends EgressError {
  readonly kind: LibvirtErrorKind;
  readonly libvirtCode: number;
  readonly libvirtDomain: number;
  /** The daemon's message (may be empty), for humans only. */
  readonly libvirtMessage: string;
  readonly level: number;
  readonly remote: RemoteError;
  /** The procedure name the error answered, when known. */
  readonly procedure: string | undefined;

  constructor(remote: RemoteError, ctx: ErrorContext & { procedureName?: string } = {}) {
    const kind = classifyLibvirtError(remote.code, remote.domain, ctx);
    const where = ctx.procedureName ? `${ctx.procedureName}: ` : '';
    // The daemon's text may be up to 4 MiB: it is cut where it enters the process (MAX_MESSAGE).
    super(KIND_CODES[kind], `${where}libvirt error ${remote.code}/${remote.domain}: ${truncateMessage(remote.message ?? '(no message)')}`, {
      retryable: RETRYABLE.has(remote.code),
    });
    this.kind = kind;
    this.libvirtCode = remote.code;
    this.libvirtDomain = remote.domain;
    this.libvirtMessage = truncateMessage(remote.message ?? '');
    this.level = remote.level;
    const cut = (text: string | null): string | null => (text === null ? null : truncateMessage(text));
    this.remote = { ...remote, message: cut(remote.message), str1: cut(remote.str1), str2: cut(remote.str2), str3: cut(remote.str3) };
    this.procedure = ctx.procedureName;
  }
}

/** The daemon offers no authentication method this client supports (SASL only). */
export class LibvirtAuthError extends EgressError {
  readonly kind = 'auth' as const;
  readonly offered: readonly number[];
  constructor(message: string, offered: readonly number[], options: { cause?: unknown } = {}) {
    super('ERR_LIBVIRT_AUTH', message, { retryable: false, ...options });
    this.offered = offered;
  }
}

/** The peer broke the protocol (bad frame length, undecodable reply). Retryable: a broken frame ends the connection and the next call dials again; a job is not at fault. */
export class LibvirtProtocolError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_LIBVIRT_PROTOCOL', message, { retryable: true, ...options });
  }
}

/**
 * The connection ended while the call was pending. When `mayHaveExecuted` is true the call had
 * been sent and the daemon may or may not have run it: reconcile by lookup before retrying.
 */
export class ConnectionLostError extends EgressError {
  readonly mayHaveExecuted: boolean;
  readonly procedure: string | undefined;
  constructor(procedure: string | undefined, mayHaveExecuted: boolean, options: { cause?: unknown } = {}) {
    const what = procedure ?? 'call';
    super(
      'ERR_LIBVIRT_CONNECTION_LOST',
      mayHaveExecuted
        ? `libvirt connection lost during ${what}: the call MAY HAVE EXECUTED on the host`
        : `libvirt connection closed before ${what} was sent: the call did not execute`,
      { retryable: true, ...options },
    );
    this.mayHaveExecuted = mayHaveExecuted;
    this.procedure = procedure;
  }
}

/** Why a connection closed when nothing failed: the client asked for it. */
export class ConnectionClosedError extends EgressError {
  constructor() {
    super('ERR_LIBVIRT_CLOSED', 'libvirt connection closed by the client', { retryable: true });
  }
}

/** The peer sent nothing within the keepalive timeout after a PING. */
export class KeepaliveTimeoutError extends EgressError {
  constructor(timeoutMs: number) {
    super('ERR_LIBVIRT_KEEPALIVE', `libvirt peer silent for ${timeoutMs} ms after a keepalive PING`, { retryable: true });
  }
}

/** The peer stopped reading: the frames this client still had to write passed the write queue's bound. */
export class PeerNotReadingError extends EgressError {
  readonly queuedBytes: number;
  constructor(queuedBytes: number, limit: number) {
    super('ERR_LIBVIRT_PEER_NOT_READING', `libvirt peer stopped reading: ${queuedBytes} bytes waiting to be written (bound ${limit}); connection dropped`, {
      retryable: true,
    });
    this.queuedBytes = queuedBytes;
  }
}

/** The peer ended or broke the byte stream. */
export class StreamEndedError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_LIBVIRT_STREAM_ENDED', message, { retryable: true, ...options });
  }
}

/**
 * The caller's signal ended the call. `cause` is `signal.reason`, and the error itself says
 * nothing about retrying: the verdict is its reason's (retried unless the reason says it is final).
 * When `mayHaveExecuted` is true the call had been sent.
 */
export class LibvirtAbortError extends EgressError {
  readonly mayHaveExecuted: boolean;
  constructor(procedure: string, reason: unknown, mayHaveExecuted: boolean) {
    super('ERR_LIBVIRT_ABORTED', `libvirt ${procedure} aborted${mayHaveExecuted ? ' after it was sent (it may have executed)' : ' before it was sent'}`, {
      cause: reason,
    });
    this.name = 'AbortError';
    this.mayHaveExecuted = mayHaveExecuted;
  }
}

/** The kind of a libvirt error anywhere in `err`'s cause chain, or undefined. */
export function libvirtErrorKind(err: unknown): LibvirtErrorKind | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof LibvirtError) return e.kind;
    if (e instanceof LibvirtAuthError) return 'auth';
  }
  return undefined;
}

export const isLibvirtNotFound = (err: unknown): boolean => libvirtErrorKind(err) === 'not-found';
export const isLibvirtExists = (err: unknown): boolean => libvirtErrorKind(err) === 'exists';
export const isLibvirtInvalidState = (err: unknown): boolean => libvirtErrorKind(err) === 'invalid-state';
export const isLibvirtAuthError = (err: unknown): boolean => libvirtErrorKind(err) === 'auth';
export const isLibvirtAccessDenied = (err: unknown): boolean => libvirtErrorKind(err) === 'access-denied';
export const isLibvirtUnsupported = (err: unknown): boolean => libvirtErrorKind(err) === 'unsupported';
