import { setMaxListeners } from 'node:events';
import pLimit from 'p-limit';
import pThrottle from 'p-throttle';

export interface Pace {
  /** Calls started per second, at most, evenly spaced (1000 / perSecond ms apart, rounded up). */
  perSecond: number;
  /** Calls running at once, at most. */
  inFlight: number;
}

/**
 * Calls `work` once for each item, in order, at the pace given: each call starts at least
 * `1000 / perSecond` ms after the previous one, and at most `inFlight` run at once. The first
 * failure (or the end of `signal`) stops any further call from starting; the calls already
 * running are waited for, then that first error is thrown. Items never started are skipped.
 */
export async function forEachPaced<T>(
  items: readonly T[],
  pace: Pace,
  work: (item: T, signal: AbortSignal) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  signal.throwIfAborted();
  if (items.length === 0) return;
  const stop = new AbortController();
  const stopped = AbortSignal.any([signal, stop.signal]);
  // What the calls get: the caller's signal, relayed once, so that `inFlight` calls (each request
  // listening on it) do not trip the max-listeners warning on the caller's signal.
  const shared = AbortSignal.any([signal]);
  setMaxListeners(8 * Math.max(1, pace.inFlight) + 10, shared);
  let failure: { error: unknown } | undefined;
  const fail = (error: unknown): void => {
    failure ??= { error };
    stop.abort(error);
  };
  // Strict mode with a limit of 1: every start is spaced from the previous one, no bursts.
  const throttled = pThrottle({ limit: 1, interval: Math.ceil(1000 / pace.perSecond), strict: true, signal: stopped })((item: T) =>
    failure || signal.aborted ? undefined : work(item, shared),
  );
  const limit = pLimit(Math.max(1, pace.inFlight));
  await Promise.all(
    items.map((item) =>
      limit(async () => {
        if (failure || stopped.aborted) return;
        try {
          await throttled(item);
        } catch (err) {
          fail(err);
        }
      }),
    ),
  );
  if (!failure && signal.aborted) fail(signal.reason);
  if (failure) throw failure.error;
}
