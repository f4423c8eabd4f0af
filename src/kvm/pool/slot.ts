/**
 * A one-holder slot whose waiting is bounded by the caller's AbortSignal. Only waiting is
 * bounded: a free slot is taken at once even when the signal has already ended (an uncontended
 * caller behaves as if there were no slot at all).
 */
export class Slot {
  private held = false;
  private readonly waiters: { grant: () => void }[] = [];

  get busy(): boolean {
    return this.held;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  /** Resolves once the slot is ours; rejects with `signal.reason` if the signal ends while waiting. */
  acquire(signal: AbortSignal): Promise<void> {
    if (!this.held) {
      this.held = true;
      return Promise.resolve();
    }
    if (signal.aborted) return Promise.reject(toError(signal.reason));
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        grant: (): void => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(toError(signal.reason));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** Hands the slot to the next waiter, or frees it. */
  release(): void {
    const next = this.waiters.shift();
    if (next) next.grant();
    else this.held = false;
  }
}

function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason));
}
