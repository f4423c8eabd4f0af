/**
 * A named collection of JSON objects with optimistic, per-object atomic updates and a change feed:
 * what the Redis stores keep (RedisJsonCollection) and what the memory stores keep
 * (MemoryCollection). The Proxy and Pool stores are written once over it
 * (collection-proxy-store.ts, collection-pool-store.ts), so the two kinds of store cannot drift.
 */

/** Returns the new object, `undefined` to leave it as it is, or `null` to delete it. */
export type Updater<T> = (current: T | undefined) => T | undefined | null;

/** What changed in a collection since a revision: every object (`full`), or the objects written since and the names removed. */
export interface CollectionChanges<T> {
  /** The revision these changes bring a reader to. */
  revision: number;
  /** True when `written` is the whole collection (the first read, or a reader the feed no longer covers). */
  full: boolean;
  written: T[];
  removed: string[];
}

export interface JsonCollection<T> {
  get(name: string, signal?: AbortSignal): Promise<T | undefined>;
  /** Several objects in one call (undefined for those that do not exist), in the order of `names`. */
  getMany(names: readonly string[], signal?: AbortSignal): Promise<(T | undefined)[]>;
  /** Every object, sorted by name. */
  list(signal?: AbortSignal): Promise<T[]>;
  /** The objects written and the names removed since `revision` (everything when undefined or older than the feed). */
  changesSince(revision: number | undefined, signal?: AbortSignal): Promise<CollectionChanges<T>>;
  /** Applies `update` to the current object as one compare-and-set (never losing a concurrent writer's change); resolves with what is stored after it. */
  update(name: string, update: Updater<T>, signal?: AbortSignal): Promise<T | undefined>;
  /** Removes the object; resolves whether it existed. */
  delete(name: string, signal?: AbortSignal): Promise<boolean>;
  close(): Promise<void>;
}

/** Writes the status of a stored object (and nothing else) through `update` (undefined: leave it); one that is gone stays gone. */
export function updateStatusIn<T extends { status: unknown }>(
  collection: JsonCollection<T>,
  name: string,
  update: (current: T) => T['status'] | undefined,
  signal?: AbortSignal,
): Promise<T | undefined> {
  return collection.update(
    name,
    (current) => {
      if (!current) return undefined;
      const status = update(current);
      return status ? { ...current, status } : undefined;
    },
    signal,
  );
}
