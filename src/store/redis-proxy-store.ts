import type { ProxyCredentials } from '../model/proxy-credentials.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { RedisClient } from '../redis/connections.ts';
import { CollectionProxyStore } from './collection-proxy-store.ts';
import { RedisJsonCollection } from './redis-json-collection.ts';

/**
 * Proxies and their credentials in Redis: `<prefix>:proxy:<name>` and `<prefix>:proxy-secret:<name>`
 * JSON objects with their indexes and change feeds (see RedisJsonCollection for the transaction
 * rules). The ProxyStore port's Redis adapter.
 */
export class RedisProxyStore extends CollectionProxyStore {
  constructor(redis: RedisClient, prefix: string, now: () => Date = () => new Date()) {
    super(
      { proxies: new RedisJsonCollection<Proxy>(redis, prefix, 'proxy'), secrets: new RedisJsonCollection<ProxyCredentials>(redis, prefix, 'proxy-secret') },
      now,
    );
  }
}
