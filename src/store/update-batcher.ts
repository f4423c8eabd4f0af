/** Returns the new object, or `undefined` to leave it as it is. */
export type Updater<T> = (current: T | undefined) => T | undefined;

interface Pending<T, U> {
  update: U;
  signal: AbortSignal | undefined;
  resolve: (value: T | undefined) => void;
  reject: (reason: unknown) => void;
}

/**
 * Runs updates of one object one write at a time, and applies the updates of an object that queue up
 * while its write runs together, in arrival order, in the next write (as the Redis store does):
 * `write(name, updates)` reads the object once, folds the updates and writes the result with one
 * compare-and-set, returning what each update left. Different objects are written in parallel.
 * Both stores use it: the Redis collection and the Kubernetes status store. `U` is the store's updater
 * (the Redis one may also answer `null`, to delete).
 */
export class UpdateBatcher<T, U = Updater<T>> {
  readonly #write: (name: string, updates: readonly U[], signal: AbortSignal) => Promise<(T | undefined)[]>;
  readonly #chains = new Map<string, Promise<void>>();
  readonly #pending = new Map<string, Pending<T, U>[]>();

  /** `write` gets a signal that ends once every caller of the batch has given up (or the store closed). */
  constructor(write: (name: string, updates: readonly U[], signal: AbortSignal) => Promise<(T | undefined)[]>) {
    this.#write = write;
  }

  update(name: string, update: U, signal?: AbortSignal): Promise<T | undefined> {
    return new Promise((resolve, reject) => {
      let batch = this.#pending.get(name);
      if (!batch) {
        batch = [];
        this.#pending.set(name, batch);
        const chain = (this.#chains.get(name) ?? Promise.resolve()).then(() => this.#flush(name));
        this.#chains.set(name, chain);
        void chain.then(() => {
          if (this.#chains.get(name) === chain) this.#chains.delete(name);
        });
      }
      batch.push({ update, signal, resolve, reject });
    });
  }

  /** Waits for the writes in progress. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#chains.values()]);
  }

  async #flush(name: string): Promise<void> {
    const batch = (this.#pending.get(name) ?? []).filter((u) => {
      if (!u.signal?.aborted) return true;
      u.reject(u.signal.reason);
      return false;
    });
    this.#pending.delete(name);
    if (batch.length === 0) return;
    const ended = everyEnded(batch.map((u) => u.signal));
    try {
      const states = await this.#write(
        name,
        batch.map((u) => u.update),
        ended.signal,
      );
      batch.forEach((u, i) => u.resolve(states[i]));
    } catch (err) {
      for (const u of batch) u.reject(err);
    } finally {
      // The callers' signals may live long (a probe loop's, a job's): the write's listeners go with the write.
      ended.release();
    }
  }
}

/** A signal that never ends: a write one of whose callers never gives up. */
const NEVER = new AbortController().signal;

/**
 * A signal that ends when every one of `signals` has ended (never, if one of them is undefined), and
 * `release`, which removes what it listens to on them.
 */
export function everyEnded(signals: readonly (AbortSignal | undefined)[]): { signal: AbortSignal; release: () => void } {
  if (signals.some((s) => s === undefined)) return { signal: NEVER, release: () => undefined };
  const all = signals as readonly AbortSignal[];
  // One caller (most writes): its own signal is the batch's, with nothing to add or remove.
  if (all.length === 1 && all[0]) return { signal: all[0], release: () => undefined };
  const controller = new AbortController();
  const check = (): void => {
    if (all.every((s) => s.aborted)) controller.abort(all[all.length - 1]?.reason);
  };
  for (const s of all) s.addEventListener('abort', check, { once: true });
  check();
  return {
    signal: controller.signal,
    release: () => {
      for (const s of all) s.removeEventListener('abort', check);
    },
  };
}
