import { randomUUID } from 'node:crypto';
import { NotFoundError } from '../errors.ts';
import { emptyPoolStatus, type Pool, type PoolDocument } from '../model/pool-resource.ts';
import type { RedisClient } from '../redis/connections.ts';
import { PoolTerminatingError, type PoolStore } from './pool-store.ts';
import type { ApplyOutcome } from './proxy-store.ts';
import { RedisJsonCollection, updateStatusIn } from './redis-json-collection.ts';

/** ProxyPools in Redis: `<prefix>:pool:<name>` JSON objects and the index `<prefix>:pools`. */
export class RedisPoolStore implements PoolStore {
  readonly #pools: RedisJsonCollection<Pool>;
  readonly #now: () => Date;

  constructor(redis: RedisClient, prefix: string, now: () => Date = () => new Date()) {
    this.#pools = new RedisJsonCollection(redis, prefix, 'pool');
    this.#now = now;
  }

  get(name: string, signal?: AbortSignal): Promise<Pool | undefined> {
    return this.#pools.get(name, signal);
  }

  list(signal?: AbortSignal): Promise<Pool[]> {
    return this.#pools.list(signal);
  }

  async apply(doc: PoolDocument, signal?: AbortSignal): Promise<{ pool: Pool; outcome: ApplyOutcome }> {
    const name = doc.metadata.name;
    let outcome: ApplyOutcome = 'unchanged';
    const stored = await this.#pools.update(
      name,
      (current) => {
        const spec = structuredClone(doc.spec);
        const labels = { ...doc.metadata.labels };
        if (!current) {
          outcome = 'created';
          return {
            name,
            labels,
            spec,
            metadata: { uid: randomUUID(), generation: 1, createdAt: this.#now().toISOString() },
            status: emptyPoolStatus(),
          };
        }
        if (current.metadata.deletionRequestedAt) throw new PoolTerminatingError(name);
        if (JSON.stringify(current.spec) === JSON.stringify(spec) && JSON.stringify(current.labels) === JSON.stringify(labels)) {
          outcome = 'unchanged';
          return undefined;
        }
        outcome = 'configured';
        return { ...current, labels, spec, metadata: { ...current.metadata, generation: current.metadata.generation + 1 } };
      },
      signal,
    );
    if (!stored) throw new NotFoundError('pool', name);
    return { pool: stored, outcome };
  }

  async requestDeletion(name: string, signal?: AbortSignal): Promise<Pool> {
    const stored = await this.#pools.update(
      name,
      (current) => {
        if (!current) throw new NotFoundError('pool', name);
        if (current.metadata.deletionRequestedAt) return undefined;
        return { ...current, metadata: { ...current.metadata, deletionRequestedAt: this.#now().toISOString() } };
      },
      signal,
    );
    if (!stored) throw new NotFoundError('pool', name);
    return stored;
  }

  updateStatus(name: string, update: (current: Pool) => Pool['status'] | undefined, signal?: AbortSignal): Promise<Pool | undefined> {
    return updateStatusIn(this.#pools, name, update, signal);
  }

  async remove(name: string, signal?: AbortSignal): Promise<void> {
    await this.#pools.delete(name, signal);
  }

  close(): Promise<void> {
    return this.#pools.close();
  }
}
