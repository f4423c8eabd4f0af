import type { RedisClient } from '../redis/connections.ts';
import { EgressError } from '../errors.ts';
import { UpdateBatcher } from './update-batcher.ts';

const MAX_ATTEMPTS = 20;

export class StoreConflictError extends EgressError {
  constructor(key: string) {
    super('ERR_STORE_CONFLICT', `gave up writing ${key} after ${MAX_ATTEMPTS} concurrent modifications`, { retryable: true });
  }
}

/** Returns the new object, `undefined` to leave it as it is, or `null` to delete it. */
export type Updater<T> = (current: T | undefined) => T | undefined | null;

/**
 * Compare-and-set of one object and its index entry, atomically.
 * KEYS[1] the object, KEYS[2] the index set. ARGV[1] the expected current text, ARGV[2] 1 when
 * the object is expected to be absent, ARGV[3] the new text, ARGV[4] 1 to delete, ARGV[5] the name.
 * Returns 1 when written, 0 when the object changed meanwhile.
 */
const COMPARE_AND_SET = `
local cur = redis.call('GET', KEYS[1])
if ARGV[2] == '1' then
  if cur then return 0 end
elseif cur ~= ARGV[1] then
  return 0
end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[5])
else
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('SADD', KEYS[2], ARGV[5])
end
return 1`;

/**
 * A named collection of JSON objects in Redis: `<prefix>:<kind>:<name>` strings and an index
 * set `<prefix>:<kind>s`. Updates are optimistic — read, compute, then a compare-and-set script
 * that writes only if nobody wrote in between (else read again) — so concurrent writers never
 * lose each other's changes and updates of different objects run in parallel. Updates of one
 * object that queue up while its write runs are applied together, in arrival order, in the next
 * one. Every key shares the hash-tagged prefix (Redis Cluster safe).
 */
export class RedisJsonCollection<T> {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #kind: string;
  /** Per object: one write at a time, the updates that queue up meanwhile folded into the next. */
  readonly #batcher = new UpdateBatcher<T, Updater<T>>((name, updates) => this.#transact(name, updates));

  constructor(redis: RedisClient, prefix: string, kind: string) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#kind = kind;
  }

  key(name: string): string {
    return `${this.#prefix}:${this.#kind}:${name}`;
  }

  get #index(): string {
    return `${this.#prefix}:${this.#kind}s`;
  }

  async get(name: string, signal?: AbortSignal): Promise<T | undefined> {
    signal?.throwIfAborted();
    const text = await this.#redis.get(this.key(name));
    return text === null ? undefined : (JSON.parse(text) as T);
  }

  /** Several objects in one round trip, in the order of `names` (undefined where absent). */
  async getMany(names: readonly string[], signal?: AbortSignal): Promise<(T | undefined)[]> {
    signal?.throwIfAborted();
    if (names.length === 0) return [];
    const texts = await this.#redis.mget(names.map((n) => this.key(n)));
    return texts.map((t) => (t === null ? undefined : (JSON.parse(t) as T)));
  }

  /** Every object, sorted by name. */
  async list(signal?: AbortSignal): Promise<T[]> {
    signal?.throwIfAborted();
    const names = (await this.#redis.smembers(this.#index)).sort();
    if (names.length === 0) return [];
    const texts = await this.#redis.mget(names.map((n) => this.key(n)));
    return texts.flatMap((t) => (t === null ? [] : [JSON.parse(t) as T]));
  }

  /** Applies `update` to the stored object atomically; resolves with what is stored afterwards. */
  update(name: string, update: Updater<T>, signal?: AbortSignal): Promise<T | undefined> {
    return this.#batcher.update(name, update, signal);
  }

  async delete(name: string, signal?: AbortSignal): Promise<boolean> {
    signal?.throwIfAborted();
    const [[, removed] = [null, 0]] = (await this.#redis.multi().del(this.key(name)).srem(this.#index, name).exec()) ?? [];
    return removed === 1;
  }

  /** Waits for writes in progress; the connection belongs to the caller. */
  close(): Promise<void> {
    return this.#batcher.close();
  }

  async #transact(name: string, updates: readonly Updater<T>[]): Promise<(T | undefined)[]> {
    const key = this.key(name);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const text = await this.#redis.get(key);
      let current = text === null ? undefined : (JSON.parse(text) as T);
      const states = updates.map((update) => {
        const next = update(current);
        current = next === null ? undefined : (next ?? current);
        return current;
      });
      const nextText = current === undefined ? null : JSON.stringify(current);
      if (nextText === text) return states;
      const args = [text ?? '', text === null ? '1' : '0', nextText ?? '', nextText === null ? '1' : '0', name];
      if ((await this.#redis.eval(COMPARE_AND_SET, 2, key, this.#index, ...args)) === 1) return states;
    }
    throw new StoreConflictError(key);
  }
}

/** Writes the status of a stored object (and nothing else) through `update` (undefined: leave it); one that is gone stays gone. */
export function updateStatusIn<T extends { status: unknown }>(
  collection: RedisJsonCollection<T>,
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
