import type { StoreSettings } from '../../config/app.ts';
import type { Logger } from '../../logging.ts';
import { buildKubeConfig } from '../../providers/kubernetes/kubeconfig.ts';
import type { Stores } from '../create-stores.ts';
import { KubernetesPoolStore } from './pool-store.ts';
import { KubernetesProxyStore } from './proxy-store.ts';
import { ProxyWatch } from './proxy-watch.ts';
import { KubernetesStatusStore } from './status-store.ts';

/** The stores of `--store kubernetes` (all but the member replacements, which stay in Redis). */
export function createKubernetesStores(settings: Extract<StoreSettings, { kind: 'kubernetes' }>, logger: Logger): Omit<Stores, 'replacements'> {
  const kc = buildKubeConfig(settings.connection, 'store');
  return {
    status: new KubernetesStatusStore(kc),
    proxies: new KubernetesProxyStore(kc, settings.namespace),
    pools: new KubernetesPoolStore(kc, settings.namespace),
    proxyChanges: new ProxyWatch(kc, settings.namespace, logger.child({ component: 'proxy-watch' })),
  };
}
