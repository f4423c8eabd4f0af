/**
 * The one retry classifier of the project: every caller that asks "may this be retried?" (the job
 * boundary, and any code that must tell a transient failure from a final one) asks `retryVerdict`.
 * Retry decisions are data on the error, read from the error itself and then down its `cause` chain:
 * - the nearest `retryAfterMs` (a finite number ≥ 0) puts the same job back as delayed for that
 *   long: "look again later" is not a failure and spends no attempt;
 * - the nearest boolean `retryable` decides: `false` fails the job at once (BullMQ's
 *   UnrecoverableError), since a retry alone cannot get past it (a 403, bad data); `true` retries;
 * - **the default: an error that says nothing is retried** with the job's backoff until its
 *   attempts are spent. A new error class that forgets its flag costs attempts, never a job that
 *   could have succeeded. Final is what a thrower states.
 * The project's EgressError carries `retryable` (absent unless its thrower sets it); this module
 * reads the data, not the class, so the job boundary depends on nothing else of ours.
 */
export type RetryVerdict = { kind: 'retry' } | { kind: 'final' } | { kind: 'later'; delayMs: number };

interface RetryData {
  retryable?: unknown;
  retryAfterMs?: unknown;
}

export function retryVerdict(err: unknown): RetryVerdict {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    const data = e as Error & RetryData;
    if (typeof data.retryAfterMs === 'number' && Number.isFinite(data.retryAfterMs) && data.retryAfterMs >= 0)
      return { kind: 'later', delayMs: data.retryAfterMs };
    if (typeof data.retryable === 'boolean') return data.retryable ? { kind: 'retry' } : { kind: 'final' };
  }
  return { kind: 'retry' };
}

/**
 * "Look again later": not a failure. The job goes back to delayed for `retryAfterMs` (its
 * deduplication id, if any, keeps coalescing requests meanwhile) and no attempt is spent.
 */
export class LookAgainLater extends Error {
  readonly code = 'ERR_LOOK_AGAIN_LATER';
  readonly retryable = true;
  readonly retryAfterMs: number;
  constructor(retryAfterMs: number, why: string) {
    super(`look again in ${retryAfterMs} ms: ${why}`);
    this.name = 'LookAgainLater';
    this.retryAfterMs = retryAfterMs;
  }
}
