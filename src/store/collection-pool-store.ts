import { randomUUID } from 'node:crypto';
import { NotFoundError } from '../errors.ts';
import { emptyPoolStatus, type Pool, type PoolDocument } from '../model/pool-resource.ts';
import { updateStatusIn, type JsonCollection } from './json-collection.ts';
import { PoolTerminatingError, type PoolStore } from './pool-store.ts';
import type { ApplyOutcome } from './proxy-store.ts';

/**
 * The PoolStore port over a collection of JSON objects: the rules written once for every store that
 * keeps pools as documents (Redis, memory). The generation moves when the spec or the labels
 * change; a pool being deleted refuses an apply with PoolTerminatingError; every write is one
 * compare-and-set of the collection, so concurrent writers never lose a change.
 */
export class CollectionPoolStore implements PoolStore {
  readonly #pools: JsonCollection<Pool>;
  readonly #now: () => Date;

  constructor(pools: JsonCollection<Pool>, now: () => Date) {
    this.#pools = pools;
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
        // Computed again on a retried compare-and-set: the last computation is the outcome.
        outcome = 'unchanged';
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
    return updateStatusIn(this.#pools, name, update, signal);
  }

  async remove(name: string, signal?: AbortSignal): Promise<void> {
    await this.#pools.delete(name, signal);
  }

  close(): Promise<void> {
    return this.#pools.close();
  }
}
