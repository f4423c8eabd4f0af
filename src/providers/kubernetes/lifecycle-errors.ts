/**
 * How the kubernetes lifecycle turns client-node failures into our errors, by HTTP status and Status
 * `reason` only (never by message text):
 * - 400 BadRequest, 422 Invalid, 404 on create (the namespace is missing): the Pod as written can never
 *   be created → `ProvisioningError` (the proxy ends `Failed` with the server's message).
 * - 401 / 403 → `KubernetesAccessError`: the provider's credentials or RBAC refused. The Proxy is not at
 *   fault, so it is not `ProvisioningError`; a retry alone does not fix it either (`retryable: false`): its
 *   reconcile job fails at once, and the next resync looks again once an operator has fixed the access.
 *   The health check reports the same condition as Unauthorized / Forbidden.
 *   Exception: a 403 to a create may also be an admission refusal (an exceeded ResourceQuota, a policy
 *   plugin), which the server answers with the same status and reason. The lifecycle does not read the
 *   message to tell them apart: it asks the server with a SelfSubjectAccessReview (access-review.ts).
 *   Allowed → admission refused → `ProvisioningError` (the proxy ends `Failed` with the server's message);
 *   not allowed, or the review fails → `KubernetesAccessError` as above.
 * - anything else (5xx, 429, 409 Conflict, 410 Expired, a transport failure) → `KubernetesRequestError`,
 *   retryable.
 * An error after the caller's signal ended is the signal's reason, unchanged.
 */
import { ApiException } from '@kubernetes/client-node';
import { EgressError } from '../../errors.ts';
import { ProvisioningError } from '../lifecycle.ts';
import { statusMessage, statusReason } from '../../clients/kubernetes/status.ts';

/** A Kubernetes API call failed in a way a later retry may get past. */
export class KubernetesRequestError extends EgressError {
  /** The HTTP status, when the server answered. */
  readonly status: number | undefined;
  /** The Status `reason` (Conflict, Expired, ServiceUnavailable…), when the server sent one. */
  readonly reason: string | undefined;
  constructor(message: string, status: number | undefined, reason: string | undefined, options: { cause?: unknown } = {}) {
    super('ERR_KUBERNETES_REQUEST', message, { ...options, retryable: true });
    this.status = status;
    this.reason = reason;
  }
}

/** 401 or 403: credentials or RBAC refused the call. Not fixed by retrying alone. */
export class KubernetesAccessError extends EgressError {
  readonly status: number;
  constructor(message: string, status: number, options: { cause?: unknown } = {}) {
    super('ERR_KUBERNETES_ACCESS', message, { ...options, retryable: false });
    this.status = status;
  }
}

/** The HTTP status of an ApiException, if the error is one. */
export function apiStatus(err: unknown): number | undefined {
  return err instanceof ApiException ? Number(err.code) : undefined;
}

/**
 * Maps a failed call (`what` says which, e.g. `creating Pod "x" in namespace "y"`). `creating` marks a
 * create, where a 404 means the namespace does not exist.
 */
export function mapKubeError(err: unknown, what: string, signal: AbortSignal, creating = false): unknown {
  if (signal.aborted) return signal.reason;
  if (err instanceof EgressError) return err;
  if (!(err instanceof ApiException)) {
    return new KubernetesRequestError(`${what}: ${err instanceof Error ? err.message : String(err)}`, undefined, undefined, { cause: err });
  }
  const code = Number(err.code);
  const reason = statusReason(err);
  const text = `${what}: ${statusMessage(err.body) ?? `HTTP ${code}`}`;
  if (code === 401 || code === 403) return new KubernetesAccessError(text, code, { cause: err });
  if (code === 400 || code === 422 || (creating && code === 404)) return new ProvisioningError(text, { cause: err });
  return new KubernetesRequestError(text, code, reason, { cause: err });
}
