import type { StoreSettings } from '../../config/app.ts';
import type { Logger } from '../../logging.ts';
import type { SecretSink } from '../../secrets/secret-registry.ts';
import { buildKubeConfig, registerKubeSecrets } from '../../clients/kubernetes/kubeconfig.ts';
import type { Stores } from '../create-stores.ts';
import { KubernetesPoolStore } from './pool-store.ts';
import { KubernetesProxyStore } from './proxy-store.ts';
import { ProxyWatch } from './proxy-watch.ts';
import { KubernetesStatusStore } from './status-store.ts';

/** The stores of `--store kubernetes` (all but the member replacements, which stay in Redis). */
export function createKubernetesStores(
  settings: Extract<StoreSettings, { kind: 'kubernetes' }>,
  logger: Logger,
  secrets?: SecretSink,
): Omit<Stores, 'replacements'> {
  const kc = buildKubeConfig(settings.connection, 'store', secrets);
  registerKubeSecrets(kc, secrets, 'store:kubeconfig');
  // Objects read back that are not taken as they are (a spec or status breaking the schema, times in the future) are logged here.
  const readBack = { logger: logger.child({ component: 'kubernetes-store' }) };
  return {
    status: new KubernetesStatusStore(kc, readBack),
    proxies: new KubernetesProxyStore(kc, settings.namespace, readBack),
    pools: new KubernetesPoolStore(kc, settings.namespace, readBack),
    proxyChanges: new ProxyWatch(kc, settings.namespace, logger.child({ component: 'proxy-watch' })),
  };
}
