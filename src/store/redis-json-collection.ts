import type { RedisClient } from '../redis/connections.ts';
import { EgressError } from '../errors.ts';
import { isTooLateReply, luaFence, writeNotAfter, WriteTooLateError } from '../redis/write-fence.ts';
import { UpdateBatcher } from './update-batcher.ts';
import type { CollectionChanges, JsonCollection, Updater } from './json-collection.ts';

const MAX_ATTEMPTS = 20;

export class StoreConflictError extends EgressError {
  constructor(key: string) {
    super('ERR_STORE_CONFLICT', `gave up writing ${key} after ${MAX_ATTEMPTS} concurrent modifications`, { retryable: true });
  }
}

/** Returns the new object, `undefined` to leave it as it is, or `null` to delete it. */

/**
 * Compare-and-set of one object and its index entry, atomically, recorded in the change feed.
 * KEYS[1] the object, KEYS[2] the index set, KEYS[3] the revision counter, KEYS[4] the changes
 * sorted set, KEYS[5] the feed's floor. ARGV[1] the expected current text, ARGV[2] 1 when the
 * object is expected to be absent, ARGV[3] the new text, ARGV[4] 1 to delete (ARGV[2] 2: delete
 * whatever is there), ARGV[5] the name, ARGV[6] how many changes the feed keeps, ARGV[7] (optional)
 * the write's fence: epoch ms after which it is refused (src/redis/write-fence.ts).
 * Returns 1 when written, 0 when the object changed meanwhile (or, for a delete, was absent).
 */
const COMPARE_AND_SET = `
${luaFence('ARGV[7]')}local cur = redis.call('GET', KEYS[1])
if ARGV[2] == '1' then
  if cur then return 0 end
elseif ARGV[2] == '2' then
  if not cur then
    redis.call('SREM', KEYS[2], ARGV[5])
    return 0
  end
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
local rev = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[4], rev, ARGV[5])
local excess = redis.call('ZCARD', KEYS[4]) - tonumber(ARGV[6])
if excess > 0 then
  local cut = redis.call('ZRANGE', KEYS[4], excess - 1, excess - 1, 'WITHSCORES')
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, excess - 1)
  redis.call('SET', KEYS[5], cut[2])
end
return 1`;

/**
 * The names written since revision ARGV[1] (-1: none asked), with the current revision and the
 * feed's floor: KEYS[1] the revision counter, KEYS[2] the changes, KEYS[3] the floor.
 */
const CHANGES_SINCE = `
local rev = redis.call('GET', KEYS[1]) or '0'
local floor = redis.call('GET', KEYS[3]) or '0'
if ARGV[1] == '-1' or tonumber(ARGV[1]) < tonumber(floor) then return {rev, floor} end
local names = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], rev)
return {rev, floor, unpack(names)}`;

/** How many names the change feed remembers (one entry per name, at its last write): a reader further behind lists everything. */
const DEFAULT_FEED_LENGTH = 50_000;

/**
 * A named collection of JSON objects in Redis: `<prefix>:<kind>:<name>` strings and an index
 * set `<prefix>:<kind>s`. Updates are optimistic — read, compute, then a compare-and-set script
 * that writes only if nobody wrote in between (else read again) — so concurrent writers never
 * lose each other's changes and updates of different objects run in parallel. Updates of one
 * object that queue up while its write runs are applied together, in arrival order, in the next
 * one. Every key shares the hash-tagged prefix (Redis Cluster safe).
 */
export class RedisJsonCollection<T> implements JsonCollection<T> {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #kind: string;
  /** Per object: one write at a time, the updates that queue up meanwhile folded into the next. */
  readonly #batcher = new UpdateBatcher<T, Updater<T>>((name, updates) => this.#transact(name, updates));

  readonly #feedLength: string;

  constructor(redis: RedisClient, prefix: string, kind: string, options: { feedLength?: number } = {}) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#kind = kind;
    this.#feedLength = String(options.feedLength ?? DEFAULT_FEED_LENGTH);
  }

  key(name: string): string {
    return `${this.#prefix}:${this.#kind}:${name}`;
  }

  get #index(): string {
    return `${this.#prefix}:${this.#kind}s`;
  }

  /** The change feed's keys: the revision counter, the changes (name → revision of its last write), the floor. */
  get #feed(): [string, string, string] {
    const base = `${this.#prefix}:${this.#kind}s`;
    return [`${base}:revision`, `${base}:changes`, `${base}:feed-floor`];
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

  /**
   * What was written or removed since `revision` (undefined: everything there is). Every write
   * moves the collection's revision and records the name in a change feed of the last
   * `feedLength` names, so a reader that polls reads only what changed (one round trip when
   * nothing did) instead of the whole collection; a reader the feed no longer covers gets `full`.
   */
  async changesSince(revision: number | undefined, signal?: AbortSignal): Promise<CollectionChanges<T>> {
    signal?.throwIfAborted();
    const reply = (await this.#redis.eval(CHANGES_SINCE, 3, ...this.#feed, String(revision ?? -1))) as string[];
    const [current = '0', floor = '0', ...names] = reply;
    if (revision === undefined || revision < Number(floor)) {
      // The revision is read before the listing: a write in between is listed and read again next time, never missed.
      return { revision: Number(current), full: true, written: await this.list(signal), removed: [] };
    }
    const objects = await this.getMany(names, signal);
    const written: T[] = [];
    const removed: string[] = [];
    names.forEach((name, i) => {
      const object = objects[i];
      if (object === undefined) removed.push(name);
      else written.push(object);
    });
    return { revision: Number(current), full: false, written, removed };
  }

  /**
   * Applies `update` to the stored object atomically; resolves with what is stored afterwards. A
   * write fenced through `signal` (fenceWrites: an API request's) is written on its own, not
   * folded with others, and Redis refuses it once its fence has passed (WriteTooLateError).
   */
  async update(name: string, update: Updater<T>, signal?: AbortSignal): Promise<T | undefined> {
    if (writeNotAfter(signal) === 0) return this.#batcher.update(name, update, signal);
    const [state] = await this.#transact(name, [update], signal);
    return state;
  }

  async delete(name: string, signal?: AbortSignal): Promise<boolean> {
    signal?.throwIfAborted();
    const removed = await this.#redis.eval(COMPARE_AND_SET, 5, this.key(name), this.#index, ...this.#feed, '', '2', '', '1', name, this.#feedLength);
    return removed === 1;
  }

  /** Waits for writes in progress; the connection belongs to the caller. */
  close(): Promise<void> {
    return this.#batcher.close();
  }

  async #transact(name: string, updates: readonly Updater<T>[], signal?: AbortSignal): Promise<(T | undefined)[]> {
    const key = this.key(name);
    const fence = String(writeNotAfter(signal));
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      signal?.throwIfAborted();
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
      // A caller that gave up while the read was queued (a stalled Redis) sends no write at all.
      signal?.throwIfAborted();
      let written: unknown;
      try {
        written = await this.#redis.eval(COMPARE_AND_SET, 5, key, this.#index, ...this.#feed, ...args, this.#feedLength, fence);
      } catch (err) {
        if (isTooLateReply(err)) throw new WriteTooLateError(`the write of ${this.#kind} "${name}"`);
        throw err;
      }
      if (written === 1) return states;
    }
    throw new StoreConflictError(key);
  }
}
