/**
 * How the gcp lifecycle turns Compute failures into our errors, by HTTP status and the API's structured
 * `reason` string (never by message text):
 * - 400 (`invalid`, a bad name, image or machine type), 404 on insert (unknown zone, image, network or
 *   template), 403/429 `quotaExceeded`, and an insert operation that ends DONE with `error` (QUOTA_EXCEEDED,
 *   ZONE_RESOURCE_POOL_EXHAUSTED, …) → `ProvisioningError` with the API's message.
 * - 401, and 403 other than quota or rate limits (a missing permission, the API disabled) →
 *   `GcpAccessError`: the Proxy is not at fault and a retry alone does not fix it (`retryable: false`);
 *   its reconcile job fails at once, and the next resync looks again once an operator has fixed the access.
 * - anything else (429/403 rate limits, 5xx, transport failures, a failed delete operation) →
 *   `GcpRequestError`, retryable.
 * An error after the caller's signal ended is the signal's reason, unchanged. The client's own error is
 * not kept as `cause`: a GaxiosError carries the request (an insert's body holds proxy credentials);
 * `cause` is a plain Error with the API's answer instead.
 */
import { EgressError } from '../../errors.ts';
import { ProvisioningError } from '../lifecycle.ts';
import { apiaryError, httpStatus, transportCode } from './classify.ts';

/** A Compute call failed in a way a later retry may get past. */
export class GcpRequestError extends EgressError {
  readonly status: number | undefined;
  /** The API's reason string (`backendError`, `rateLimitExceeded`…) or an operation's error code. */
  readonly reason: string | undefined;
  constructor(message: string, status: number | undefined, reason: string | undefined, options: { cause?: unknown } = {}) {
    super('ERR_GCP_REQUEST', message, { ...options, retryable: true });
    this.status = status;
    this.reason = reason;
  }
}

/** 401 or 403: credentials or IAM refused the call (or the Compute API is disabled). Not fixed by retrying alone. */
export class GcpAccessError extends EgressError {
  readonly status: number;
  readonly reason: string | undefined;
  constructor(message: string, status: number, reason: string | undefined, options: { cause?: unknown } = {}) {
    super('ERR_GCP_ACCESS', message, { ...options, retryable: false });
    this.status = status;
    this.reason = reason;
  }
}

const QUOTA_REASONS = new Set(['quotaExceeded']);
const RATE_REASONS = new Set(['rateLimitExceeded', 'userRateLimitExceeded']);

/** The client's answer without its request: message (the API's JSON), HTTP status, transport code. */
function redacted(err: unknown): Error {
  const plain = new Error(err instanceof Error ? err.message : String(err)) as Error & { status?: number; code?: string };
  const status = httpStatus(err);
  if (status !== undefined) plain.status = status;
  const code = transportCode(err);
  if (code !== undefined) plain.code = code;
  return plain;
}

/** Maps a failed call; `inserting` marks an insert, where 404 means a referenced resource is missing. */
export function mapComputeError(err: unknown, what: string, signal: AbortSignal, inserting = false): unknown {
  if (signal.aborted) return signal.reason;
  if (err instanceof EgressError) return err;
  const cause = redacted(err);
  const status = httpStatus(err);
  if (status === undefined) {
    const code = transportCode(err);
    const text = err instanceof Error ? err.message : String(err);
    return new GcpRequestError(`${what}: ${code ? `${code}: ` : ''}${text}`, undefined, code, { cause });
  }
  const { message, reason } = apiaryError(err);
  const text = `${what}: HTTP ${status}${reason ? ` ${reason}` : ''}: ${message ?? 'no error message'}`;
  if (reason !== undefined && QUOTA_REASONS.has(reason)) return new ProvisioningError(text, { cause });
  if (reason !== undefined && RATE_REASONS.has(reason)) return new GcpRequestError(text, status, reason, { cause });
  if (status === 401 || status === 403) return new GcpAccessError(text, status, reason, { cause });
  if (status === 400 || (inserting && status === 404)) return new ProvisioningError(text, { cause });
  return new GcpRequestError(text, status, reason, { cause });
}

/** The errors of an operation that ended DONE with `error`, as one message (`CODE: message; …`). */
export function operationErrorText(error: { errors?: { code?: string | null; message?: string | null }[] | null }): { code: string | undefined; text: string } {
  const errors = error.errors ?? [];
  const text = errors.map((e) => [e.code, e.message].filter(Boolean).join(': ')).join('; ') || 'the operation failed without details';
  return { code: errors[0]?.code ?? undefined, text };
}
