import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { remoteProxyEgressPolicy } from '../../egress/policy-config.ts';
import type { TargetResult } from '../../health/types.ts';
import type { Provider, ProviderDeps } from '../types.ts';
import { createKubernetesLifecycle } from './lifecycle.ts';
import { classifyKubeError, truncateMessage } from './classify.ts';
import type { KubernetesProviderConfig } from './config.ts';
import { apiHost, buildKubeConfig, registerKubeSecrets } from '../../clients/kubernetes/kubeconfig.ts';
import { MANAGED_LABEL_SELECTOR } from './labels.ts';
import { CHECK_BODY_BYTES, cappedHttpLibrary } from './capped-http.ts';
import { raceAbort, tracedHttp, withSignal } from '../../clients/kubernetes/request-options.ts';

export const KUBERNETES_TARGET = 'apiserver';

export interface KubernetesProviderOptions {
  /** A ready KubeConfig instead of building one from the config (tests, embedding). */
  kubeConfig?: KubeConfig;
}

/**
 * The kubernetes provider. Its health check lists at most one managed Pod cluster-wide, or in each of
 * its `namespaces` when they are given: the same verb, scope and selector the lifecycle and GC work use,
 * so a check that passes proves their RBAC too.
 * Throws ConfigError at creation when the kubeconfig, context or token file is unusable.
 */
export function createKubernetesProvider(config: KubernetesProviderConfig, deps: ProviderDeps, options: KubernetesProviderOptions = {}): Provider {
  const kc = options.kubeConfig ?? buildKubeConfig(config, `providers.${config.name}`, deps.secrets);
  registerKubeSecrets(kc, deps.secrets, `providers.${config.name}:kubeconfig`);
  const host = apiHost(kc);
  const api = kc.makeApiClient(CoreV1Api);
  // createProvider() already binds `provider` to the logger.
  const log = deps.logger.child({ type: 'kubernetes', host });
  let closed = false;
  // With `namespaces`, every list is namespaced (a Role suffices); otherwise cluster-wide.
  const namespaces = config.namespaces ? [...new Set([config.namespace, ...config.namespaces])].sort() : undefined;
  // A check reads at most CHECK_BODY_BYTES of an answer: a server that sends more fails the check, not the worker.
  const capped = { httpApi: tracedHttp(cappedHttpLibrary(CHECK_BODY_BYTES)) };

  async function check(signal: AbortSignal): Promise<TargetResult[]> {
    const started = performance.now();
    const result = (ready: boolean, reason: TargetResult['reason'], message: string): TargetResult[] => [
      {
        target: KUBERNETES_TARGET,
        ready,
        reason,
        message: truncateMessage(message),
        details: { host },
        durationSeconds: (performance.now() - started) / 1000,
      },
    ];
    if (closed) return result(false, 'Error', 'provider is closed');
    try {
      // The signal aborts the HTTP request, but credentials are resolved before it is sent (an exec
      // plugin, a token file) and cannot be interrupted: stop waiting for them when the signal ends.
      if (!namespaces) {
        const list = await raceAbort(api.listPodForAllNamespaces({ labelSelector: MANAGED_LABEL_SELECTOR, limit: 1 }, withSignal(signal, capped)), signal);
        const seen = list.items.length > 0 ? 'at least one managed Pod' : 'no managed Pods';
        return result(true, 'Ok', `listed Pods cluster-wide (${seen})`);
      }
      let seen = 0;
      for (const namespace of namespaces) {
        const list = await raceAbort(api.listNamespacedPod({ namespace, labelSelector: MANAGED_LABEL_SELECTOR, limit: 1 }, withSignal(signal, capped)), signal);
        seen += list.items.length;
      }
      const where = namespaces.length === 1 ? `namespace ${namespaces[0] ?? ''}` : `namespaces ${namespaces.join(', ')}`;
      return result(true, 'Ok', `listed Pods in ${where} (${seen > 0 ? 'at least one managed Pod' : 'no managed Pods'})`);
    } catch (err) {
      if (signal.aborted) {
        log.debug({ err }, 'health check ended by its signal');
        return result(false, 'Timeout', `no answer from the API server at ${host} before the check timed out`);
      }
      const { reason, message } = classifyKubeError(err);
      log.debug({ reason, err }, 'health check failed');
      return result(false, reason, message);
    }
  }

  const lifecycle = config.proxies
    ? createKubernetesLifecycle({
        kubeConfig: kc,
        namespace: config.namespace,
        ...(config.namespaces ? { namespaces: config.namespaces } : {}),
        image: config.proxies.image,
        port: config.proxies.port,
        ...(config.proxies.service ? { service: config.proxies.service } : {}),
        egressPolicy: remoteProxyEgressPolicy(config.proxies.egressPolicy, deps.egress),
        logger: deps.logger,
      })
    : undefined;
  return {
    ...(lifecycle ? { lifecycle } : {}),
    name: config.name,
    type: 'kubernetes',
    check,
    targets: () => [KUBERNETES_TARGET],
    // The client keeps no connections (client-node 1.x makes an agent per request): nothing to release.
    close: () => {
      closed = true;
      return Promise.resolve();
    },
  };
}
