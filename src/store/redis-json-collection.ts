import type { Redis } from 'ioredis';
import { EgressError } from '../errors.ts';

const MAX_ATTEMPTS = 20;

export class StoreConflictError extends EgressError {
  constructor(key: string) {
    super('ERR_STORE_CONFLICT', `gave up writing ${key} after ${MAX_ATTEMPTS} concurrent modifications`, { retryable: true });
  }
}

/** Returns the new object, `undefined` to leave it as it is, or `null` to delete it. */
export type Updater<T> = (current: T | undefined) => T | undefined | null;

interface PendingUpdate<T> {
  update: Updater<T>;
  signal: AbortSignal | undefined;
  resolve: (value: T | undefined) => void;
  reject: (reason: unknown) => void;
}

/**
 * A named collection of JSON objects in Redis: `<prefix>:<kind>:<name>` strings and an index
 * set `<prefix>:<kind>s`. Updates are optimistic (WATCH/MULTI on a connection of their own), so
 * concurrent writers never lose each other's changes; updates of one object that queue up while
 * a transaction runs are applied together, in arrival order, in the next one. Every key shares
 * the hash-tagged prefix (Redis Cluster safe).
 */
export class RedisJsonCollection<T> {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #kind: string;
  #txConn: Redis | undefined;
  #txQueue: Promise<unknown> = Promise.resolve();
  readonly #pending = new Map<string, PendingUpdate<T>[]>();

  constructor(redis: Redis, prefix: string, kind: string) {
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
    return new Promise((resolve, reject) => {
      let batch = this.#pending.get(name);
      if (!batch) {
        batch = [];
        this.#pending.set(name, batch);
        this.#txQueue = this.#txQueue.catch(() => undefined).then(() => this.#flush(name));
      }
      batch.push({ update, signal, resolve, reject });
    });
  }

  async delete(name: string, signal?: AbortSignal): Promise<boolean> {
    signal?.throwIfAborted();
    const [[, removed] = [null, 0]] = (await this.#redis.multi().del(this.key(name)).srem(this.#index, name).exec()) ?? [];
    return removed === 1;
  }

  /** Closes the transaction connection; the shared one belongs to the caller. */
  async close(): Promise<void> {
    await this.#txQueue.catch(() => undefined);
    const conn = this.#txConn;
    this.#txConn = undefined;
    if (conn) await conn.quit().catch(() => conn.disconnect());
  }

  async #flush(name: string): Promise<void> {
    const batch = (this.#pending.get(name) ?? []).filter((u) => {
      if (!u.signal?.aborted) return true;
      u.reject(u.signal.reason);
      return false;
    });
    this.#pending.delete(name);
    if (batch.length === 0) return;
    try {
      const states = await this.#transact(name, batch.map((u) => u.update));
      batch.forEach((u, i) => u.resolve(states[i]));
    } catch (err) {
      for (const u of batch) u.reject(err);
    }
  }

  async #transact(name: string, updates: readonly Updater<T>[]): Promise<(T | undefined)[]> {
    const key = this.key(name);
    const conn = (this.#txConn ??= this.#redis.duplicate());
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      await conn.watch(key);
      const text = await conn.get(key);
      let current = text === null ? undefined : (JSON.parse(text) as T);
      const states = updates.map((update) => {
        const next = update(current);
        current = next === null ? undefined : (next ?? current);
        return current;
      });
      const nextText = current === undefined ? null : JSON.stringify(current);
      if (nextText === text) {
        await conn.unwatch();
        return states;
      }
      const tx = conn.multi();
      if (nextText === null) tx.del(key).srem(this.#index, name);
      else tx.set(key, nextText).sadd(this.#index, name);
      if ((await tx.exec()) !== null) return states;
    }
    throw new StoreConflictError(key);
  }
}
