import { randomUUID } from 'node:crypto';
import { NotFoundError } from '../errors.ts';
import { emptyPoolStatus, type Pool, type PoolDocument } from '../model/pool-resource.ts';
import { MemoryCollection, updateStatusOf } from './memory-collection.ts';
import { PoolTerminatingError, type PoolStore } from './pool-store.ts';
import type { ApplyOutcome } from './proxy-store.ts';

/**
 * ProxyPools in this process's memory: the PoolStore port without Redis, for pure tests and
 * embedding. It keeps the port's rules as RedisPoolStore does (the conformance suite in test/store/
 * runs both): the generation moves when the spec or the labels change, a pool being deleted refuses
 * an apply with PoolTerminatingError, and each write is one synchronous step (MemoryCollection).
 */
export class MemoryPoolStore implements PoolStore {
  readonly #pools = new MemoryCollection<Pool>();
  readonly #now: () => Date;

  constructor(now: () => Date = () => new Date()) {
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
        if (JSON.stringify(current.spec) === JSON.stringify(spec) && JSON.stringify(current.labels) === JSON.stringify(labels)) return undefined;
        outcome = 'configured';
        return { ...current, labels, spec, metadata: { ...current.metadata, generation: current.metadata.generation + 1 } };
      },
      signal,
    );
    if (!stored) throw new NotFoundError('pool', name);
    return { pool: stored, outcome };
  }

  /** Marks the pool for deletion; it stays until its members are gone. NotFoundError when there is no such pool. */
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

  /** Writes status (and nothing else) through `update`; a pool that is gone stays gone. */
  updateStatus(name: string, update: (current: Pool) => Pool['status'] | undefined, signal?: AbortSignal): Promise<Pool | undefined> {
    return updateStatusOf(this.#pools, name, update, signal);
  }

  async remove(name: string, signal?: AbortSignal): Promise<void> {
    await this.#pools.delete(name, signal);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
