import { CheckFailedError, CheckWaitTimeoutError } from '../checks/check-errors.ts';
import type { CheckResultData } from '../health/check-result.ts';
import type { WorkRequests } from './work-requests.ts';

/** One request as `MemoryWorkRequests` records it. */
export type WorkRequest =
  | { readonly kind: 'reconcile-proxy'; readonly proxy: string }
  | { readonly kind: 'reconcile-pool'; readonly pool: string }
  | { readonly kind: 'look-at-pool'; readonly pool: string; readonly delayMs: number }
  | { readonly kind: 'check-provider'; readonly provider: string; readonly checkId: string };

type CheckOutcome = { ok: true; result: CheckResultData } | { ok: false; reason: string };

/**
 * The work-requests port in memory, with no Redis: every request is recorded in order (nothing
 * runs it), a test waits for one with `next`, and finishes an awaited check with `finishCheck` or
 * `failCheck`. `fail` makes the next requests reject, as a queue that cannot be reached would.
 */
export class MemoryWorkRequests implements WorkRequests {
  readonly requests: WorkRequest[] = [];
  #checks = 0;
  #failure: Error | undefined;
  readonly #waiters = new Set<{ match: (r: WorkRequest) => boolean; resolve: (r: WorkRequest) => void }>();
  readonly #outcomes = new Map<string, CheckOutcome>();
  readonly #checkWaiters = new Map<string, Set<(o: CheckOutcome) => void>>();

  reconcileProxy(proxy: string): Promise<void> {
    return this.#record({ kind: 'reconcile-proxy', proxy });
  }

  reconcilePool(pool: string): Promise<void> {
    return this.#record({ kind: 'reconcile-pool', pool });
  }

  lookAtPool(pool: string, delayMs: number): Promise<void> {
    return this.#record({ kind: 'look-at-pool', pool, delayMs });
  }

  async checkProvider(provider: string): Promise<string> {
    const checkId = `check-${++this.#checks}`;
    await this.#record({ kind: 'check-provider', provider, checkId });
    return checkId;
  }

  async awaitCheck(checkId: string, signal: AbortSignal): Promise<CheckResultData> {
    const known = this.#outcomes.get(checkId);
    const outcome =
      known ??
      (await new Promise<CheckOutcome>((resolve, reject) => {
        if (signal.aborted) {
          reject(new CheckWaitTimeoutError(checkId, signal.reason));
          return;
        }
        const waiters = this.#checkWaiters.get(checkId) ?? new Set();
        this.#checkWaiters.set(checkId, waiters);
        const onAbort = (): void => {
          waiters.delete(settle);
          reject(new CheckWaitTimeoutError(checkId, signal.reason));
        };
        const settle = (o: CheckOutcome): void => {
          signal.removeEventListener('abort', onAbort);
          resolve(o);
        };
        waiters.add(settle);
        signal.addEventListener('abort', onAbort, { once: true });
      }));
    if (!outcome.ok) throw new CheckFailedError(checkId, outcome.reason);
    return outcome.result;
  }

  /** Finishes an ad-hoc check: whoever awaits it gets `result`. */
  finishCheck(checkId: string, result: CheckResultData): void {
    this.#settle(checkId, { ok: true, result });
  }

  /** Fails an ad-hoc check with `reason`. */
  failCheck(checkId: string, reason: string): void {
    this.#settle(checkId, { ok: false, reason });
  }

  /** From now on every request rejects with `err` (undefined: they are recorded again). */
  fail(err: Error | undefined): void {
    this.#failure = err;
  }

  /** The first request, already made or still to come, that `match` accepts. */
  next(match: (r: WorkRequest) => boolean = () => true): Promise<WorkRequest> {
    const made = this.requests.find(match);
    if (made) return Promise.resolve(made);
    return new Promise((resolve) => this.#waiters.add({ match, resolve }));
  }

  /** The names of the proxies whose reconcile was asked for, in order, repeats included. */
  proxyReconciles(): string[] {
    return this.requests.flatMap((r) => (r.kind === 'reconcile-proxy' ? [r.proxy] : []));
  }

  /** The names of the pools whose reconcile was asked for, in order, repeats included. */
  poolReconciles(): string[] {
    return this.requests.flatMap((r) => (r.kind === 'reconcile-pool' ? [r.pool] : []));
  }

  #record(request: WorkRequest): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure);
    this.requests.push(request);
    for (const w of this.#waiters) {
      if (!w.match(request)) continue;
      this.#waiters.delete(w);
      w.resolve(request);
    }
    return Promise.resolve();
  }

  #settle(checkId: string, outcome: CheckOutcome): void {
    this.#outcomes.set(checkId, outcome);
    for (const settle of this.#checkWaiters.get(checkId) ?? []) settle(outcome);
    this.#checkWaiters.delete(checkId);
  }
}
