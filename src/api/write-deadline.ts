import type { Context, MiddlewareHandler } from 'hono';
import { fenceWrites } from '../redis/write-fence.ts';
import { raceSignal } from './read-deadline.ts';
import { setWriteScope, storeUnavailableResponse, StoreUnavailableError, writeScopeOf } from './store-unavailable.ts';

/**
 * Gives every write request (any method but GET and HEAD) a deadline: one still waiting on Redis
 * after `deadlineMs` (a stall: ioredis queues commands while the server does not answer) is answered
 * 503 ERR_STORE_UNAVAILABLE with Retry-After instead of hanging (the deadline starts once the body
 * has arrived). The request's signal fences its
 * writes `fenceMarginMs` before that (src/redis/write-fence.ts): Redis refuses any of them that
 * reaches it later, so a write answered 503 is not applied when Redis resumes. Routes pass
 * `fencedWrite(c)` to the stores; a route that does not is answered `write: unknown` (queue
 * operations, which BullMQ's own scripts run unfenced).
 */
export function writeDeadline(deadlineMs: number, fenceMarginMs: number, exempt: readonly string[]): MiddlewareHandler {
  return async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD' || exempt.includes(c.req.path)) return next();
    // The body first: a slow upload is the client's time, not the store's. One that fails (too
    // large, cut short) stays in Hono's cache as that failure, for the handler's read to fail as it
    // always has. One that arrives is handed on as a fresh body (and the cache forgotten), so a
    // route's own body limit (feedback's 1 KiB) still reads it through its stream.
    const body = await c.req.arrayBuffer().then(
      (bytes) => bytes,
      () => undefined,
    );
    if (body === undefined) return next();
    let fresh: Request;
    try {
      fresh = new Request(c.req.raw, { body });
    } catch {
      // A method fetch's Request refuses (TRACE): no route serves it; the body stays cached.
      return next();
    }
    c.req.raw = fresh;
    delete c.req.bodyCache.arrayBuffer;
    const controller = new AbortController();
    fenceWrites(controller.signal, Date.now() + deadlineMs - fenceMarginMs);
    const message = `no answer from the store within ${deadlineMs / 1000}s: Redis is unreachable or overloaded`;
    const timer = setTimeout(() => controller.abort(new StoreUnavailableError(message)), deadlineMs);
    setWriteScope(c, { signal: controller.signal, guarantee: 'unknown', items: [], release: () => clearTimeout(timer) });
    try {
      await raceSignal(next(), controller.signal, () => new StoreUnavailableError(message));
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) throw err;
      c.res = storeUnavailableResponse(c, message);
    } finally {
      clearTimeout(timer);
    }
  };
}

/**
 * The signal a route hands its store writes (fenced): a 503 at the deadline then says `write:
 * not-applied`. Undefined where no deadline covers the request (its body could not be read: the
 * handler's own read fails the same way).
 */
export function fencedWrite(c: Context): AbortSignal | undefined {
  const scope = writeScopeOf(c);
  if (scope) scope.guarantee = 'not-applied';
  return scope?.signal;
}

/** Records what a request has applied (a document, a replacement request): a 503 after it lists it in `items`. */
export function writeApplied(c: Context, item: unknown): void {
  writeScopeOf(c)?.items.push(item);
}

/** Ends the request's write deadline once its writes are done (what follows has a deadline of its own). */
export function releaseWriteDeadline(c: Context): void {
  writeScopeOf(c)?.release();
}
