import type { CheckResultData } from '../health/check-result.ts';

/**
 * The work-requests port: how the domain, the API and the consumers ask for work to be done.
 * Every request names what to look at and nothing else (reconciles are level-triggered), so a
 * request may be coalesced with others of the same name; none waits for the work itself except
 * `awaitCheck`. The BullMQ implementation (`src/jobs/bullmq-work-requests.ts`) is the one that
 * knows queues; `MemoryWorkRequests` (memory-work-requests.ts) records requests for tests.
 */
export interface WorkRequests {
  /** Asks for a reconcile of one proxy; a burst of requests runs at most one reconcile plus one follow-up. */
  reconcileProxy(proxy: string): Promise<void>;
  /** Asks for a reconcile of one pool, coalesced per pool like proxy reconciles. */
  reconcilePool(pool: string): Promise<void>;
  /**
   * Asks for a look at one pool in `delayMs` (a member reaching maxAge): then a pool reconcile is
   * requested. Looks due in the same second are one look; the reconcile itself is never delayed.
   */
  lookAtPool(pool: string, delayMs: number, now?: number): Promise<void>;
  /**
   * Asks for an ad-hoc check of one provider and returns the id to await it by. A request made
   * while a "check now" of that provider has not started joins it.
   */
  checkProvider(provider: string): Promise<string>;
  /**
   * The result of the check `checkProvider` returned, once it finished: `CheckFailedError` if it
   * failed or is gone, `CheckWaitTimeoutError` when `signal` ends first (src/checks/check-errors.ts).
   */
  awaitCheck(checkId: string, signal: AbortSignal): Promise<CheckResultData>;
}
