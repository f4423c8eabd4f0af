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

type Updater = (current: ProviderHealth | undefined) => ProviderHealth | undefined;

interface PendingUpdate {
  update: Updater;
  signal: AbortSignal | undefined;
  resolve: (value: ProviderHealth | undefined) => void;
  reject: (reason: unknown) => void;
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
  readonly #pending = new Map<string, PendingUpdate[]>();

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

  updateProviderHealth(
    name: string,
    update: (current: ProviderHealth | undefined) => ProviderHealth | undefined,
    signal?: AbortSignal,
  ): Promise<ProviderHealth | undefined> {
    return new Promise((resolve, reject) => {
      let batch = this.#pending.get(name);
      if (!batch) {
        batch = [];
        this.#pending.set(name, batch);
        // Updates of one object that queue up while a transaction runs are applied together,
        // in arrival order, in the next one: one WATCH/GET/MULTI for many results.
        const run = this.#txQueue.catch(() => undefined).then(() => this.#flush(name));
        this.#txQueue = run;
      }
      batch.push({ update, signal, resolve, reject });
    });
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

  /** Applies `updates` in order to the stored object in one optimistic transaction; returns the state after each. */
  async #transact(name: string, updates: readonly Updater[]): Promise<(ProviderHealth | undefined)[]> {
    const key = this.#key(name);
    const conn = (this.#txConn ??= this.#redis.duplicate());
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      await conn.watch(key);
      const text = await conn.get(key);
      let current = text === null ? undefined : (JSON.parse(text) as ProviderHealth);
      const states = updates.map((update) => {
        current = update(current) ?? current;
        return current;
      });
      const nextText = current === undefined ? null : JSON.stringify(current);
      if (nextText === null || nextText === text) {
        await conn.unwatch();
        return states;
      }
      const done = await conn.multi().set(key, nextText).sadd(this.#index, name).exec();
      if (done !== null) return states;
    }
    throw new StoreConflictError(key);
  }

  async deleteProviderHealth(name: string, signal?: AbortSignal): Promise<boolean> {
    throwIfAborted(signal);
    const [[, removed] = [null, 0]] = (await this.#redis.multi().del(this.#key(name)).srem(this.#index, name).exec()) ?? [];
    return removed === 1;
  }
}
