import type { CollectionChanges, JsonCollection, Updater } from './json-collection.ts';

/** How many names the change feed remembers, as the Redis feed's default: a reader further behind lists everything. */
const DEFAULT_FEED_LENGTH = 50_000;

/**
 * A named collection of objects in this process's memory: what the memory stores keep, as
 * RedisJsonCollection is what the Redis stores keep. Objects are held as JSON text, so what goes
 * in and comes out is always a copy, and shaped as a Redis round trip leaves it (an `undefined`
 * field is dropped). Every call is one synchronous step once its signal is checked: an update reads,
 * computes and writes with nothing in between, so concurrent writers never lose each other's
 * changes, and a call whose signal has ended rejects and writes nothing.
 */
export class MemoryCollection<T> implements JsonCollection<T> {
  readonly #texts = new Map<string, string>();
  /** The change feed: name → revision of its last write (or removal), oldest first. */
  readonly #feed = new Map<string, number>();
  readonly #feedLength: number;
  #revision = 0;
  /** Readers behind this revision are no longer covered by the feed. */
  #floor = 0;

  constructor(options: { feedLength?: number } = {}) {
    this.#feedLength = options.feedLength ?? DEFAULT_FEED_LENGTH;
  }

  get(name: string, signal?: AbortSignal): Promise<T | undefined> {
    return run(signal, () => this.#read(name));
  }

  /** Several objects, in the order of `names` (undefined where absent). */
  getMany(names: readonly string[], signal?: AbortSignal): Promise<(T | undefined)[]> {
    return run(signal, () => names.map((name) => this.#read(name)));
  }

  /** Every object, sorted by name. */
  list(signal?: AbortSignal): Promise<T[]> {
    return run(signal, () => this.#list());
  }

  /** What was written or removed since `revision` (undefined: everything there is); see RedisJsonCollection.changesSince. */
  changesSince(revision: number | undefined, signal?: AbortSignal): Promise<CollectionChanges<T>> {
    return run(signal, () => {
      if (revision === undefined || revision < this.#floor) return { revision: this.#revision, full: true, written: this.#list(), removed: [] };
      const written: T[] = [];
      const removed: string[] = [];
      for (const [name, rev] of this.#feed) {
        if (rev <= revision) continue;
        const object = this.#read(name);
        if (object === undefined) removed.push(name);
        else written.push(object);
      }
      return { revision: this.#revision, full: false, written, removed };
    });
  }

  /** Applies `update` to the stored object in one step; resolves with what is stored afterwards. */
  update(name: string, update: Updater<T>, signal?: AbortSignal): Promise<T | undefined> {
    return run(signal, () => this.#update(name, update));
  }

  /** The updater sees a copy; an update that leaves the text as it was is no write (the revision stays). */
  #update(name: string, update: Updater<T>): T | undefined {
    const text = this.#texts.get(name);
    const next = update(text === undefined ? undefined : (JSON.parse(text) as T));
    if (next === undefined) return text === undefined ? undefined : (JSON.parse(text) as T);
    if (next === null) {
      if (text !== undefined) this.#delete(name);
      return undefined;
    }
    const nextText = JSON.stringify(next);
    if (nextText !== text) {
      this.#texts.set(name, nextText);
      this.#record(name);
    }
    return JSON.parse(nextText) as T;
  }

  /** Removes the object; resolves false when there was none. */
  delete(name: string, signal?: AbortSignal): Promise<boolean> {
    return run(signal, () => this.#delete(name));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  #delete(name: string): boolean {
    if (!this.#texts.delete(name)) return false;
    this.#record(name);
    return true;
  }

  #read(name: string): T | undefined {
    const text = this.#texts.get(name);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }

  #list(): T[] {
    return [...this.#texts.keys()].sort().flatMap((name) => {
      const object = this.#read(name);
      return object === undefined ? [] : [object];
    });
  }

  /** Moves the revision and records `name` at it (once per name, at its last write); the oldest entries fall off the feed. */
  #record(name: string): void {
    this.#revision += 1;
    this.#feed.delete(name);
    this.#feed.set(name, this.#revision);
    while (this.#feed.size > this.#feedLength) {
      const [oldest, rev] = this.#feed.entries().next().value as [string, number];
      this.#feed.delete(oldest);
      this.#floor = rev;
    }
  }
}

/** Runs `op` as a store call: rejected, untouched, when the signal has ended (as a throw inside `op` rejects too). */
export function run<R>(signal: AbortSignal | undefined, op: () => R): Promise<R> {
  return new Promise((resolve) => {
    signal?.throwIfAborted();
    resolve(op());
  });
}
