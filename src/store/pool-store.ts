import { EgressError } from '../errors.ts';
import type { Pool, PoolDocument } from '../model/pool-resource.ts';
import type { ApplyOutcome } from './proxy-store.ts';

/**
 * Where ProxyPool objects live: a port like ProxyStore (Redis, or ProxyPool custom resources with
 * `--store kubernetes`). Member Proxies live in the ProxyStore, labelled `egress-proxies.io/pool`.
 *
 * Rules every implementation keeps:
 * - every write of one pool is a compare-and-set, so concurrent writers never lose a change;
 * - the generation moves only when the spec or labels change.
 */

export class PoolTerminatingError extends EgressError {
  constructor(readonly pool: string) {
    super('ERR_POOL_TERMINATING', `pool "${pool}" is being deleted; apply it again once it is gone`);
  }
}

export interface PoolReader {
  get(name: string, signal?: AbortSignal): Promise<Pool | undefined>;
  /** Every pool, sorted by name. */
  list(signal?: AbortSignal): Promise<Pool[]>;
}

/** The desired state, as users change it (the API). */
export interface PoolSpecWriter {
  /** Creates the pool or updates its labels and spec. A pool being deleted is refused with PoolTerminatingError. */
  apply(doc: PoolDocument, signal?: AbortSignal): Promise<{ pool: Pool; outcome: ApplyOutcome }>;
  /** Marks the pool for deletion; it stays until its members are gone. NotFoundError when there is no such pool. */
  requestDeletion(name: string, signal?: AbortSignal): Promise<Pool>;
}

/** The observed state, as the pool reconcile writes it. */
export interface PoolStatusWriter {
  /** Writes status (and nothing else) through `update` (undefined: leave it); a pool that is gone stays gone. */
  updateStatus(name: string, update: (current: Pool) => Pool['status'] | undefined, signal?: AbortSignal): Promise<Pool | undefined>;
  /** Forgets a deleted pool whose members are gone; no error when it is already gone. */
  remove(name: string, signal?: AbortSignal): Promise<void>;
}

export type PoolApiStore = PoolReader & PoolSpecWriter;
export type PoolReconcileStore = PoolReader & PoolStatusWriter;

export interface PoolStore extends PoolReader, PoolSpecWriter, PoolStatusWriter {
  /** Waits for writes in progress; the connection belongs to the caller. */
  close(): Promise<void>;
}
