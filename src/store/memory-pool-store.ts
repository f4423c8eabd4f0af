import type { Pool } from '../model/pool-resource.ts';
import { CollectionPoolStore } from './collection-pool-store.ts';
import { MemoryCollection } from './memory-collection.ts';

/**
 * ProxyPools in this process's memory: the PoolStore port without Redis, for pure tests and
 * embedding, with RedisPoolStore's rules (the same CollectionPoolStore over a MemoryCollection;
 * the conformance suite in test/store/ runs both).
 */
export class MemoryPoolStore extends CollectionPoolStore {
  constructor(now: () => Date = () => new Date()) {
    super(new MemoryCollection<Pool>(), now);
  }
}
