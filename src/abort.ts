import { setMaxListeners } from 'node:events';
import { DeadlineError } from './errors.ts';

/**
 * Settles with `work`, or rejects with the signal's reason as soon as the signal ends (a late
 * rejection of `work` is then ignored). For the parts of a call that the signal cannot abort:
 * a credential lookup, an SDK's initialisation.
 */
export async function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  work.catch(() => undefined);
  signal.throwIfAborted();
  let onAbort = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Deadlines for many short operations at a high rate (an API's reads, a worker's checks): the
 * operations that start within one `granularityMs` window share one signal, which ends `ms` to
 * `ms + granularityMs` after each of them started, with a DeadlineError, or earlier with `parent`
 * (its reason passed on). One AbortController and one timer per window instead of one per
 * operation: at a thousand requests a second, per-request controllers and timers were most of what
 * survived the API's young-generation collections, and lengthened them; for checks, making the
 * signal was the largest own cost of a job (docs/benchmarks.md). Nothing needs clearing: a window's
 * timer is unref'd, and it stops listening to `parent` when it ends.
 */
export class SharedDeadlines {
  readonly #ms: number;
  readonly #granularityMs: number;
  readonly #now: () => number;
  readonly #parent: AbortSignal | undefined;
  #window: { signal: AbortSignal; closesAt: number } | undefined;

  constructor(ms: number, granularityMs = 50, now: () => number = () => performance.now(), parent?: AbortSignal) {
    this.#ms = ms;
    this.#granularityMs = granularityMs;
    this.#now = now;
    this.#parent = parent;
  }

  /** The signal of the current window (a new window when the last one has closed). */
  signal(): AbortSignal {
    const now = this.#now();
    const current = this.#window;
    if (current && now < current.closesAt) return current.signal;
    const controller = new AbortController();
    // Every operation of the window listens to this one signal for as long as it runs.
    setMaxListeners(0, controller.signal);
    const parent = this.#parent;
    const onParentAbort = (): void => controller.abort(parent?.reason);
    if (parent?.aborted) controller.abort(parent.reason);
    else parent?.addEventListener('abort', onParentAbort, { once: true });
    const total = this.#ms + this.#granularityMs;
    setTimeout(() => {
      parent?.removeEventListener('abort', onParentAbort);
      controller.abort(new DeadlineError(`deadline of ${this.#ms} ms passed`));
    }, total).unref();
    this.#window = { signal: controller.signal, closesAt: now + this.#granularityMs };
    return controller.signal;
  }
}
