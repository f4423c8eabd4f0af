/**
 * The kubernetes side of the proxy lifecycle: a proxy instance is a Pod named after the instance in
 * `placement` (or the configured namespace), carrying MANAGED_LABELS plus the fleet and proxy labels.
 * A Pod without them is never read as ours, listed, or deleted. Every call passes the caller's signal
 * to the HTTP request (`withSignal`) and stops waiting for credentials when it ends (`raceAbort`).
 * Error mapping: see lifecycle-errors.ts.
 */
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../logging.ts';
import { ProvisioningError, type Instance, type InstanceSpec, type ProxyLifecycle } from '../lifecycle.ts';
import { MANAGED_LABEL_SELECTOR } from './labels.ts';
import { apiStatus, mapKubeError } from './lifecycle-errors.ts';
import { FLEET_LABEL, PROXY_LABEL, fleetSelector, isManaged, podManifest, podToInstance } from './lifecycle-pod.ts';
import { raceAbort, withSignal } from './request-options.ts';

export { KubernetesAccessError, KubernetesRequestError } from './lifecycle-errors.ts';
export { FLEET_LABEL, PROXY_LABEL, PROXY_CONTAINER } from './lifecycle-pod.ts';

export const DEFAULT_PROXY_IMAGE = 'ghcr.io/egress-proxies/forward-proxy:1';
export const DEFAULT_PROXY_PORT = 3128;
/** Pods per list page in `listInstances`. */
export const DEFAULT_PAGE_SIZE = 500;

export interface KubernetesLifecycleOptions {
  /** How to reach the API server (`buildKubeConfig` of the provider's config). */
  kubeConfig: KubeConfig;
  /** Namespace for proxies whose spec has no placement. */
  namespace: string;
  /** Forward-proxy image; it must read PROXY_PORT, PROXY_USER and PROXY_PASSWORD. Default DEFAULT_PROXY_IMAGE. */
  image?: string;
  /** Port the forward proxy listens on in the Pod. Default 3128. */
  port?: number;
  logger: Logger;
  /** `limit` of each list page (default 500). */
  pageSize?: number;
}

export function createKubernetesLifecycle(options: KubernetesLifecycleOptions): ProxyLifecycle {
  const api = options.kubeConfig.makeApiClient(CoreV1Api);
  const image = options.image ?? DEFAULT_PROXY_IMAGE;
  const port = options.port ?? DEFAULT_PROXY_PORT;
  const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const log = options.logger.child({ component: 'kubernetes-lifecycle' });
  const namespaceOf = (placement: string | undefined): string => placement ?? options.namespace;

  /** Runs one API call with the signal; maps its failure. */
  async function call<T>(what: string, signal: AbortSignal, fn: () => Promise<T>, creating = false): Promise<T> {
    try {
      return await raceAbort(fn(), signal);
    } catch (err) {
      throw mapKubeError(err, what, signal, creating);
    }
  }

  /** The Pod, or undefined when there is none (404). */
  async function readPod(name: string, namespace: string, signal: AbortSignal): Promise<V1Pod | undefined> {
    try {
      return await raceAbort(api.readNamespacedPod({ name, namespace }, withSignal(signal)), signal);
    } catch (err) {
      if (!signal.aborted && apiStatus(err) === 404) return undefined;
      throw mapKubeError(err, `reading Pod "${name}" in namespace "${namespace}"`, signal);
    }
  }

  /** An existing Pod of that name: ours and this proxy's, or a ProvisioningError naming whose it is. */
  function adopt(pod: V1Pod, spec: InstanceSpec, namespace: string): Instance {
    const labels = pod.metadata?.labels ?? {};
    if (!isManaged(pod)) {
      throw new ProvisioningError(`a Pod named "${spec.name}" exists in namespace "${namespace}" without our labels; it is left alone`);
    }
    if (labels[FLEET_LABEL] !== spec.owner.fleet || labels[PROXY_LABEL] !== spec.owner.proxy) {
      throw new ProvisioningError(
        `Pod "${spec.name}" in namespace "${namespace}" belongs to proxy "${labels[PROXY_LABEL]}" of fleet "${labels[FLEET_LABEL]}", not "${spec.owner.proxy}" of "${spec.owner.fleet}"`,
      );
    }
    return podToInstance(pod, port);
  }

  return {
    async ensureInstance(spec, signal) {
      const namespace = namespaceOf(spec.placement);
      const existing = await readPod(spec.name, namespace, signal);
      if (existing) return adopt(existing, spec, namespace);
      const body = podManifest(spec, { namespace, image, port });
      try {
        const created = await raceAbort(api.createNamespacedPod({ namespace, body }, withSignal(signal)), signal);
        log.info({ instance: spec.name, namespace, proxy: spec.owner.proxy, image }, 'proxy Pod created');
        return podToInstance(created, port);
      } catch (err) {
        // A concurrent ensure created it between our read and our create: continue from what it made.
        if (!signal.aborted && apiStatus(err) === 409) {
          const raced = await readPod(spec.name, namespace, signal);
          if (raced) return adopt(raced, spec, namespace);
        }
        throw mapKubeError(err, `creating Pod "${spec.name}" in namespace "${namespace}"`, signal, true);
      }
    },

    async getInstance(name, placement, signal) {
      const pod = await readPod(name, namespaceOf(placement), signal);
      return pod && isManaged(pod) ? podToInstance(pod, port) : undefined;
    },

    async deleteInstance(name, placement, signal) {
      const namespace = namespaceOf(placement);
      const pod = await readPod(name, namespace, signal);
      if (!pod) return;
      if (!isManaged(pod)) {
        log.warn({ instance: name, namespace }, 'Pod has no labels of ours; not deleting it');
        return;
      }
      if (pod.metadata?.deletionTimestamp) return;
      try {
        await raceAbort(api.deleteNamespacedPod({ name, namespace }, withSignal(signal)), signal);
        log.info({ instance: name, namespace }, 'proxy Pod deleted');
      } catch (err) {
        if (!signal.aborted && apiStatus(err) === 404) return;
        throw mapKubeError(err, `deleting Pod "${name}" in namespace "${namespace}"`, signal);
      }
    },

    async *listInstances(fleet, signal) {
      const labelSelector = fleetSelector(MANAGED_LABEL_SELECTOR, fleet);
      let token: string | undefined;
      do {
        const page = await call('listing proxy Pods', signal, () =>
          api.listPodForAllNamespaces({ labelSelector, limit: pageSize, ...(token ? { _continue: token } : {}) }, withSignal(signal)),
        );
        for (const pod of page.items) {
          // The server filtered already; checking again costs nothing and guards the "never touch" rule.
          if (isManaged(pod) && pod.metadata?.labels?.[FLEET_LABEL] === fleet) yield podToInstance(pod, port);
        }
        token = page.metadata?._continue || undefined;
      } while (token);
    },
  };
}
