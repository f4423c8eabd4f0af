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

/** A signal that ends with its parent or after `ms`, whichever comes first; `clear` releases its timer. */
export interface Deadline {
  readonly signal: AbortSignal;
  clear(): void;
}

/**
 * `AbortSignal.any([parent, AbortSignal.timeout(ms)])` without their cost: on Node 20 each of
 * those signals is tracked for garbage collection, which is most of a no-op check's overhead
 * (docs/benchmarks.md). The deadline's reason is a DeadlineError saying how long it was; the
 * parent's reason is passed on unchanged. Call `clear` when the work is done.
 */
export function deadline(parent: AbortSignal | undefined, ms: number): Deadline {
  const controller = new AbortController();
  const onParentAbort = (): void => controller.abort(parent?.reason);
  const timer = setTimeout(() => controller.abort(new DeadlineError(`deadline of ${ms} ms passed`)), ms);
  if (parent?.aborted) controller.abort(parent.reason);
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  return {
    signal: controller.signal,
    clear() {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
}

/** Runs `work` under `deadline(parent, ms)` and releases the deadline when it settles. */
export async function withDeadline<T>(parent: AbortSignal | undefined, ms: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const limit = deadline(parent, ms);
  try {
    return await work(limit.signal);
  } finally {
    limit.clear();
  }
}
