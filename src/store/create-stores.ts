import type { SecretSink } from '../secrets/secret-registry.ts';
import type { StoreSettings } from '../config/app.ts';
import type { Logger } from '../logging.ts';
import type { RedisClient } from '../redis/connections.ts';
import type { ProxyChangeFeed, ProxyStore } from './proxy-store.ts';
import { RedisProxyStore } from './redis-proxy-store.ts';
import { RedisStatusStore } from './redis-status-store.ts';
import type { StatusStore } from './status-store.ts';
import type { PoolStore } from './pool-store.ts';
import { RedisPoolStore } from './redis-pool-store.ts';
import { RedisMemberReplacements, type MemberReplacements } from './member-replacements.ts';

/** The stores of one process, as `--store` chose them. */
export interface Stores {
  status: StatusStore & { close(): Promise<void> };
  proxies: ProxyStore;
  pools: PoolStore;
  /** Requests to replace pool members (ban feedback); always in Redis, beside the feedback state. */
  replacements: MemberReplacements;
  /** With `--store kubernetes`: the watch on Proxy objects, run by the leading scheduler. */
  proxyChanges: ProxyChangeFeed | undefined;
}

/**
 * Redis (the default) or Kubernetes custom resources; the Redis connection is the caller's. The
 * Kubernetes stores (and their client library) are loaded only when `--store kubernetes` asks for them.
 */
export async function createStores(
  settings: StoreSettings | undefined,
  redis: RedisClient,
  prefix: string,
  logger: Logger,
  secrets?: SecretSink,
): Promise<Stores> {
  if (settings?.kind !== 'kubernetes') {
    return {
      status: new RedisStatusStore(redis, prefix),
      proxies: new RedisProxyStore(redis, prefix),
      pools: new RedisPoolStore(redis, prefix),
      replacements: new RedisMemberReplacements(redis, prefix),
      proxyChanges: undefined,
    };
  }
  const { createKubernetesStores } = await import('./kubernetes/create-kubernetes-stores.ts');
  return { ...createKubernetesStores(settings, logger, secrets), replacements: new RedisMemberReplacements(redis, prefix) };
}
