import type { ProxyCredentials } from '../model/proxy-credentials.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import { CollectionProxyStore } from './collection-proxy-store.ts';
import { MemoryCollection } from './memory-collection.ts';

/**
 * Proxies and their credentials in this process's memory: the ProxyStore port without Redis, for
 * pure tests and embedding, with RedisProxyStore's rules (the same CollectionProxyStore over two
 * MemoryCollections; the conformance suite in test/store/ runs both).
 */
export class MemoryProxyStore extends CollectionProxyStore {
  constructor(now: () => Date = () => new Date()) {
    super({ proxies: new MemoryCollection<Proxy>(), secrets: new MemoryCollection<ProxyCredentials>() }, now);
  }
}
