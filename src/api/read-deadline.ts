import type { Context, MiddlewareHandler } from 'hono';
import { SharedDeadlines } from '../abort.ts';
import { storeUnavailableResponse, StoreUnavailableError } from './store-unavailable.ts';

export { StoreUnavailableError } from './store-unavailable.ts';

/** Rejects with `onAbort()` when `signal` aborts first; `work` is left to finish (or fail) on its own. */
export function raceSignal<T>(work: Promise<T>, signal: AbortSignal, onAbort: () => Error): Promise<T> {
  if (signal.aborted) return Promise.reject(onAbort());
  return new Promise<T>((resolve, reject) => {
    const abort = (): void => reject(onAbort());
    signal.addEventListener('abort', abort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', abort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', abort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

const readSignals = new WeakMap<Context, AbortSignal>();

/** The signal that ends when this read's deadline passes (undefined for a request readDeadline does not cover). */
export function readSignalOf(c: Context): AbortSignal | undefined {
  return readSignals.get(c);
}

/**
 * Gives every read (GET/HEAD) a deadline: a handler still waiting on Redis after `deadlineMs`
 * (an outage: ioredis queues commands while it reconnects) is answered 503 ERR_STORE_UNAVAILABLE
 * with Retry-After instead of hanging. The handler's late result is dropped; `readSignalOf(c)` hands its Redis
 * calls the same deadline. Reads that start within 50 ms share one signal (SharedDeadlines): a
 * controller and a timer per request were most of what survived the API's young-generation
 * collections at a thousand picks a second.
 */
export function readDeadline(deadlineMs: number, exempt: readonly string[]): MiddlewareHandler {
  const deadlines = new SharedDeadlines(deadlineMs);
  return async (c, next) => {
    if ((c.req.method !== 'GET' && c.req.method !== 'HEAD') || exempt.includes(c.req.path)) return next();
    const signal = deadlines.signal();
    readSignals.set(c, signal);
    try {
      await raceSignal(
        next(),
        signal,
        () => new StoreUnavailableError(`no answer from the store within ${deadlineMs / 1000}s: Redis is unreachable or overloaded; try again`),
      );
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) throw err;
      c.res = storeUnavailableResponse(c, err.message);
    }
  };
}
