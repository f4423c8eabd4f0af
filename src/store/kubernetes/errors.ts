import { ApiException } from '@kubernetes/client-node';
import { EgressError } from '../../errors.ts';
import { statusMessage, statusReason } from '../../clients/kubernetes/status.ts';

/**
 * A Kubernetes store call failed. Retryable unless the server refused the request as such (400, 401,
 * 403, 422): a retry alone does not fix credentials, RBAC or an object the CRD's schema rejects.
 */
export class KubernetesStoreError extends EgressError {
  /** The HTTP status, when the server answered. */
  readonly status: number | undefined;
  /** The Status `reason` (Conflict, Invalid, Expired…), when the server sent one. */
  readonly reason: string | undefined;
  constructor(message: string, status: number | undefined, reason: string | undefined, options: { cause?: unknown; retryable?: boolean } = {}) {
    super('ERR_KUBERNETES_STORE', message, {
      cause: options.cause,
      retryable: options.retryable ?? (status === undefined || ![400, 401, 403, 422].includes(status)),
    });
    this.status = status;
    this.reason = reason;
  }
}

/** Optimistic writes of one object kept losing to other writers (409 Conflict every time). */
export class KubernetesConflictError extends EgressError {
  constructor(what: string, attempts: number, options: { cause?: unknown } = {}) {
    super('ERR_STORE_CONFLICT', `gave up writing ${what} after ${attempts} conflicting concurrent modifications`, { ...options, retryable: true });
  }
}

/** The HTTP status of a client-node ApiException, if the error is one. */
export function httpStatus(err: unknown): number | undefined {
  return err instanceof ApiException ? Number(err.code) : undefined;
}

/** Wraps a failed call (`what` says which); the signal's reason when the caller's signal ended first. */
export function storeError(err: unknown, what: string, signal?: AbortSignal): unknown {
  if (signal?.aborted) return signal.reason;
  if (err instanceof EgressError) return err;
  if (err instanceof ApiException) {
    const code = Number(err.code);
    return new KubernetesStoreError(`${what}: ${statusMessage(err.body) ?? `HTTP ${code}`}`, code, statusReason(err), { cause: err });
  }
  return new KubernetesStoreError(`${what}: ${err instanceof Error ? err.message : String(err)}`, undefined, undefined, { cause: err });
}

/**
 * A list the server answered that is not a well-formed inventory (no `items`, a `continue` that is
 * not a string; repeated tokens and endless pages are ListingPagesError). Nothing may be concluded from it — least of all that an object
 * is absent — so it fails the caller; retried, as a later answer may be whole.
 */
export function malformedList(what: string, problem: string): KubernetesStoreError {
  return new KubernetesStoreError(`${what}: ${problem}; nothing is concluded from an incomplete list`, undefined, 'MalformedList', { retryable: true });
}
