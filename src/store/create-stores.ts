import type { StoreSettings } from '../config/app.ts';
import type { Logger } from '../logging.ts';
import { buildKubeConfig } from '../providers/kubernetes/kubeconfig.ts';
import type { RedisClient } from '../redis/connections.ts';
import { KubernetesPoolStore } from './kubernetes/pool-store.ts';
import { KubernetesProxyStore } from './kubernetes/proxy-store.ts';
import { ProxyWatch } from './kubernetes/proxy-watch.ts';
import { KubernetesStatusStore } from './kubernetes/status-store.ts';
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

/** Redis (the default) or Kubernetes custom resources; the Redis connection is the caller's. */
export function createStores(settings: StoreSettings | undefined, redis: RedisClient, prefix: string, logger: Logger): Stores {
  if (settings?.kind !== 'kubernetes') {
    return {
      status: new RedisStatusStore(redis, prefix),
      proxies: new RedisProxyStore(redis, prefix),
      pools: new RedisPoolStore(redis, prefix),
      replacements: new RedisMemberReplacements(redis, prefix),
      proxyChanges: undefined,
    };
  }
  const kc = buildKubeConfig(settings.connection, 'store');
  // Objects read back that are not taken as they are (a spec or status breaking the schema, times in the future) are logged here.
  const readBack = { logger: logger.child({ component: 'kubernetes-store' }) };
  return {
    status: new KubernetesStatusStore(kc, readBack),
    proxies: new KubernetesProxyStore(kc, settings.namespace, readBack),
    pools: new KubernetesPoolStore(kc, settings.namespace, readBack),
    replacements: new RedisMemberReplacements(redis, prefix),
    proxyChanges: new ProxyWatch(kc, settings.namespace, logger.child({ component: 'proxy-watch' })),
  };
}
