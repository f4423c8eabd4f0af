import type { Context } from 'hono';
import { EgressError } from '../errors.ts';

/** How long a client is asked to wait (Retry-After, seconds) before it tries again while the store does not answer. */
export const STORE_RETRY_AFTER_SECONDS = 1;

/** The status store (Redis) did not answer in time or is not connected: answered 503 with Retry-After. */
export class StoreUnavailableError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_STORE_UNAVAILABLE', message, { retryable: true, ...options });
  }
}

/**
 * What a write request answered 503 says of its writes (`write` in the body, docs/operations.md):
 * - `not-applied`: every write of the request is fenced (src/redis/write-fence.ts): nothing but
 *   the `items` listed was applied, and nothing else will be when Redis answers again;
 * - `unknown`: a queue operation (BullMQ: checks, job retries, Bull Board) that cannot be fenced;
 *   it may still be applied when Redis answers again: look before re-sending what is not idempotent.
 */
export type WriteGuarantee = 'not-applied' | 'unknown';

/** A write request's deadline: its signal (fenced), what it promises when it runs out, and what it applied so far. */
export interface WriteScope {
  readonly signal: AbortSignal;
  guarantee: WriteGuarantee;
  readonly items: unknown[];
  /** Ends the deadline: what is left of the request waits on something else with a deadline of its own (`?wait=true`). */
  release(): void;
}

const scopes = new WeakMap<Context, WriteScope>();

export function setWriteScope(c: Context, scope: WriteScope): void {
  scopes.set(c, scope);
}

export function writeScopeOf(c: Context): WriteScope | undefined {
  return scopes.get(c);
}

/** 503 ERR_STORE_UNAVAILABLE with Retry-After; a write's answer also says what became of it (`write`, `items`). */
export function storeUnavailableResponse(c: Context, message: string): Response {
  c.header('Retry-After', String(STORE_RETRY_AFTER_SECONDS));
  const scope = writeScopeOf(c);
  if (!scope) return c.json({ error: 'ERR_STORE_UNAVAILABLE', message }, 503);
  const write =
    scope.guarantee === 'not-applied'
      ? `not applied${scope.items.length > 0 ? ' (but for the items listed)' : ''}, and it will not be: re-sending it is safe`
      : 'it may still be applied when Redis answers again: look before re-sending it';
  return c.json({ error: 'ERR_STORE_UNAVAILABLE', message: `${message}; this request was ${write}`, write: scope.guarantee, items: scope.items }, 503);
}
