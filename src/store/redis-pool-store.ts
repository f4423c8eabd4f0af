import type { Pool } from '../model/pool-resource.ts';
import type { RedisClient } from '../redis/connections.ts';
import { CollectionPoolStore } from './collection-pool-store.ts';
import { RedisJsonCollection } from './redis-json-collection.ts';

/** ProxyPools in Redis: `<prefix>:pool:<name>` JSON objects and the index `<prefix>:pools`. */
export class RedisPoolStore extends CollectionPoolStore {
  constructor(redis: RedisClient, prefix: string, now: () => Date = () => new Date()) {
    super(new RedisJsonCollection<Pool>(redis, prefix, 'pool'), now);
  }
}
