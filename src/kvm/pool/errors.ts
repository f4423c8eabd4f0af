/** Errors of the KVM host pool. */
import { DeadlineError, EgressError } from '../../errors.ts';

export type PoolMode = 'call' | 'probe';

/** A probe was refused at once: an earlier probe of this host was abandoned and is still waiting. */
export class ProbeBusyError extends EgressError {
  readonly host: string;
  constructor(host: string) {
    super('ERR_KVM_PROBE_BUSY', `KVM host "${host}": an earlier probe is still waiting for an answer; not sending another`, {
      retryable: true,
    });
    this.host = host;
  }
}

/**
 * An abandoned probe was still waiting `waitedMs` after its deadline: the connection answers (PINGs)
 * but not calls, so it was dropped and the next caller dials again.
 */
export class ProbeReclaimedError extends EgressError {
  readonly host: string;
  constructor(host: string, waitedMs: number) {
    super('ERR_KVM_PROBE_RECLAIMED', `KVM host "${host}": an abandoned probe had no answer ${waitedMs} ms after its deadline; connection dropped`, {
      retryable: true,
    });
    this.host = host;
  }
}

/** The pool is closed (or closing): no new work here. Retryable: the job's next run, in a worker still running, gets a pool. */
export class PoolClosedError extends EgressError {
  constructor() {
    super('ERR_KVM_POOL_CLOSED', 'KVM host pool is closed', { retryable: true });
  }
}

/** The caller's signal ended for a reason other than a timeout. */
export class KvmAbortedError extends EgressError {
  readonly host: string;
  constructor(host: string, mode: PoolMode, reason: unknown) {
    super('ERR_KVM_ABORTED', `KVM ${mode} on host "${host}" aborted`, { cause: reason, retryable: true });
    this.host = host;
  }
}

/**
 * The error a caller gets when its signal ends: a DeadlineError when the signal timed out
 * (AbortSignal.timeout's TimeoutError), the pool's PoolClosedError as is, else a KvmAbortedError.
 */
export function callerAbortError(host: string, mode: PoolMode, signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof PoolClosedError) return reason;
  if (reason instanceof DeadlineError) return reason;
  if (isTimeoutReason(reason)) return new DeadlineError(`KVM ${mode} on host "${host}" timed out`, { cause: reason });
  return new KvmAbortedError(host, mode, reason);
}

function isTimeoutReason(reason: unknown): boolean {
  return typeof reason === 'object' && reason !== null && (reason as { name?: unknown }).name === 'TimeoutError';
}
