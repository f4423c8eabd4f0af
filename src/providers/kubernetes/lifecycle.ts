/**
 * The kubernetes side of the proxy lifecycle. A proxy instance is, in `placement` (or the configured
 * namespace), all named after the instance and carrying MANAGED_LABELS plus the fleet and proxy labels:
 * - a Secret (type Opaque) with the credentials, keys PROXY_USER and PROXY_PASSWORD, and the provider's
 *   egress policy document, key EGRESS_PROXY_POLICY;
 * - with `service` configured, a Service selecting the Pod, whose address is the proxy's endpoint;
 * - the Pod, reading the three from the Secret (`secretKeyRef`) and annotated with the Secret's
 *   resourceVersion, so that a Pod made for older credentials or an older policy is replaced (env is not
 *   reloaded). An unchanged policy writes nothing.
 * An object without our labels is never read as ours, listed, or deleted. Every call passes the caller's
 * signal to the HTTP request (`withSignal`) and stops waiting for credentials when it ends (`raceAbort`).
 * The paths: ensure-objects.ts, delete-objects.ts, inventory.ts; how objects read back: instance-view.ts.
 * Error mapping: see lifecycle-errors.ts (and access-review.ts for a 403 on a create).
 */
import { CoreV1Api, type KubeConfig, type V1Pod, type V1Secret, type V1Service } from '@kubernetes/client-node';
import type { ProxyEgressPolicy } from '../../egress/policy-config.ts';
import type { Logger } from '../../logging.ts';
import { ProvisioningError, type ProxyLifecycle } from '../lifecycle.ts';
import { policyDocument } from '../policy-document.ts';
import { DEFAULT_MAX_PAGES } from '../../clients/page-bound.ts';
import { forbiddenCreateExplainer } from './access-review.ts';
import type { KubernetesServiceConfig } from './config.ts';
import { deleteOwnObjects } from './delete-objects.ts';
import { objectsEnsurer } from './ensure-objects.ts';
import { leftoverInstance, servedInstance } from './instance-view.ts';
import { fleetInstances } from './inventory.ts';
import { objectCalls } from './lifecycle-calls.ts';
import { isManagedObject } from './lifecycle-owner.ts';
import { packageVersion } from '../../version.ts';

export { KubernetesAccessError, KubernetesRequestError } from './lifecycle-errors.ts';
export { FLEET_LABEL, PROXY_LABEL, PROXY_CONTAINER, SECRET_VERSION_ANNOTATION } from './lifecycle-pod.ts';

/** Where the project's proxy image (Dockerfile.proxy) is pushed; docs/kubernetes-provider.md#the-proxy-image. */
export const PROXY_IMAGE_REPOSITORY = 'ghcr.io/egress-proxies/egress-proxy';
/** Dockerfile.proxy built from this release: the repository, tagged with the package's version. */
export const DEFAULT_PROXY_IMAGE = `${PROXY_IMAGE_REPOSITORY}:${packageVersion()}`;
export const DEFAULT_PROXY_PORT = 3128;
/** Objects per list page in `listInstances`. */
export const DEFAULT_PAGE_SIZE = 500;

export interface KubernetesLifecycleOptions {
  /** How to reach the API server (`buildKubeConfig` of the provider's config). */
  kubeConfig: KubeConfig;
  /** Namespace for proxies whose spec has no placement. */
  namespace: string;
  /**
   * The namespaces the provider may use (with `namespace`): listing goes namespace by namespace and a
   * placement outside them is refused. Undefined: listing is cluster-wide and any placement is used.
   */
  namespaces?: readonly string[];
  /** Forward-proxy image; it must read PROXY_PORT, PROXY_USER, PROXY_PASSWORD and enforce EGRESS_PROXY_POLICY. Default DEFAULT_PROXY_IMAGE. */
  image?: string;
  /** Port the forward proxy listens on in the Pod (and the Service's port). Default 3128. */
  port?: number;
  /** A Service per proxy whose address is the endpoint; without it the endpoint is the Pod IP. */
  service?: KubernetesServiceConfig;
  logger: Logger;
  /** `limit` of each list page (default 500). */
  pageSize?: number;
  /** Pages one listing may take before it fails (default DEFAULT_MAX_PAGES); a repeated `continue` fails at once. */
  maxPages?: number;
  /** The document every proxy receives (`proxyEgressPolicy` of the provider's config); default: the default deny alone. */
  egressPolicy?: ProxyEgressPolicy;
}

export function createKubernetesLifecycle(options: KubernetesLifecycleOptions): ProxyLifecycle {
  const api = options.kubeConfig.makeApiClient(CoreV1Api);
  const image = options.image ?? DEFAULT_PROXY_IMAGE;
  const port = options.port ?? DEFAULT_PROXY_PORT;
  const serviceConfig = options.service;
  const policy = policyDocument(options.egressPolicy);
  const log = options.logger.child({ component: 'kubernetes-lifecycle' });
  const calls = objectCalls(api, forbiddenCreateExplainer(options.kubeConfig, log), log);
  const { read } = calls;
  const namespaceOf = (placement: string | undefined): string => placement ?? options.namespace;
  const allowed = options.namespaces ? [...new Set([options.namespace, ...options.namespaces])].sort() : undefined;
  const ensure = objectsEnsurer({ api, calls, log, image, port, policy, service: serviceConfig });
  const inventory = {
    api,
    call: calls.call,
    namespaces: allowed,
    pageSize: options.pageSize ?? DEFAULT_PAGE_SIZE,
    maxPages: options.maxPages ?? DEFAULT_MAX_PAGES,
    port,
  };

  return {
    async ensureInstance(spec, signal) {
      const namespace = namespaceOf(spec.placement);
      if (allowed && !allowed.includes(namespace)) {
        throw new ProvisioningError(
          `placement "${namespace}": expected one of the provider's namespaces (${allowed.map((n) => `"${n}"`).join(', ')}); add it to the provider's namespaces (and grant the provider's Role there)`,
        );
      }
      return ensure(spec, namespace, signal);
    },

    async getInstance(name, placement, signal) {
      const namespace = namespaceOf(placement);
      const pod = await read<V1Pod>('Pod', name, namespace, signal);
      if (pod && isManagedObject(pod)) {
        const service = serviceConfig ? await read<V1Service>('Service', name, namespace, signal) : undefined;
        return servedInstance(pod, service, port, serviceConfig);
      }
      if (serviceConfig) {
        const service = await read<V1Service>('Service', name, namespace, signal);
        if (service && isManagedObject(service)) return leftoverInstance('Service', service);
      }
      const secret = await read<V1Secret>('Secret', name, namespace, signal);
      return secret && isManagedObject(secret) ? leftoverInstance('Secret', secret) : undefined;
    },

    deleteInstance: (name, placement, { owner }, signal) =>
      deleteOwnObjects({ api, calls, log, withService: serviceConfig !== undefined }, name, namespaceOf(placement), owner, signal),

    listInstances: (fleet, signal) => fleetInstances(inventory, fleet, signal),
  };
}
