import type { Redis } from 'ioredis';
import { EgressError } from '../errors.ts';
import type { ProviderHealth } from '../health/provider-health.ts';
import type { StatusStore } from './status-store.ts';

const MAX_ATTEMPTS = 20;

export class StoreConflictError extends EgressError {
  constructor(key: string) {
    super('ERR_STORE_CONFLICT', `gave up writing ${key} after ${MAX_ATTEMPTS} concurrent modifications`, { retryable: true });
  }
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  signal?.throwIfAborted();
}

/**
 * ProviderHealth objects as JSON strings under `<prefix>:providerhealth:<name>`, with an index
 * set `<prefix>:providerhealths`. Updates are optimistic (WATCH/MULTI), so two publishers never
 * lose each other's writes. Every key shares the hash-tagged prefix (Redis Cluster safe).
 */
export class RedisStatusStore implements StatusStore {
  readonly #redis: Redis;
  readonly #prefix: string;
  /** WATCH needs a connection of its own, used by one transaction at a time. */
  #txConn: Redis | undefined;
  #txQueue: Promise<unknown> = Promise.resolve();

  constructor(redis: Redis, prefix: string) {
    this.#redis = redis;
    this.#prefix = prefix;
  }

  /** Closes the transaction connection; the shared one belongs to the caller. */
  async close(): Promise<void> {
    await this.#txQueue.catch(() => undefined);
    const conn = this.#txConn;
    this.#txConn = undefined;
    if (conn) await conn.quit().catch(() => conn.disconnect());
  }

  #key(name: string): string {
    return `${this.#prefix}:providerhealth:${name}`;
  }

  get #index(): string {
    return `${this.#prefix}:providerhealths`;
  }

  async getProviderHealth(name: string, signal?: AbortSignal): Promise<ProviderHealth | undefined> {
    throwIfAborted(signal);
    const text = await this.#redis.get(this.#key(name));
    return text === null ? undefined : (JSON.parse(text) as ProviderHealth);
  }

  async listProviderHealth(signal?: AbortSignal): Promise<ProviderHealth[]> {
    throwIfAborted(signal);
    const names = (await this.#redis.smembers(this.#index)).sort();
    if (names.length === 0) return [];
    const texts = await this.#redis.mget(names.map((n) => this.#key(n)));
    return texts.flatMap((t) => (t === null ? [] : [JSON.parse(t) as ProviderHealth]));
  }

  async updateProviderHealth(
    name: string,
    update: (current: ProviderHealth | undefined) => ProviderHealth | undefined,
    signal?: AbortSignal,
  ): Promise<ProviderHealth | undefined> {
    const run = this.#txQueue.catch(() => undefined).then(() => this.#transact(name, update, signal));
    this.#txQueue = run;
    return run;
  }

  async #transact(
    name: string,
    update: (current: ProviderHealth | undefined) => ProviderHealth | undefined,
    signal?: AbortSignal,
  ): Promise<ProviderHealth | undefined> {
    const key = this.#key(name);
    const conn = (this.#txConn ??= this.#redis.duplicate());
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      throwIfAborted(signal);
      await conn.watch(key);
      const text = await conn.get(key);
      const current = text === null ? undefined : (JSON.parse(text) as ProviderHealth);
      const next = update(current);
      if (next === undefined) {
        await conn.unwatch();
        return current;
      }
      const nextText = JSON.stringify(next);
      if (nextText === text) {
        await conn.unwatch();
        return current;
      }
      const done = await conn.multi().set(key, nextText).sadd(this.#index, name).exec();
      if (done !== null) return next;
    }
    throw new StoreConflictError(key);
  }

  async deleteProviderHealth(name: string, signal?: AbortSignal): Promise<boolean> {
    throwIfAborted(signal);
    const [[, removed] = [null, 0]] = (await this.#redis.multi().del(this.#key(name)).srem(this.#index, name).exec()) ?? [];
    return removed === 1;
  }
}
