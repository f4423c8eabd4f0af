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
 * Error mapping: see lifecycle-errors.ts (and access-review.ts for a 403 on a create).
 */
import { CoreV1Api, type KubeConfig, type V1ObjectMeta, type V1Pod, type V1Secret, type V1Service } from '@kubernetes/client-node';
import { proxyEgressPolicy, type ProxyEgressPolicy } from '../../egress/policy-config.ts';
import type { Logger } from '../../logging.ts';
import { ForeignInstanceError, ProvisioningError, type Instance, type InstanceSpec, type ProxyLifecycle } from '../lifecycle.ts';
import { DEFAULT_MAX_PAGES, PageBound } from '../../clients/page-bound.ts';
import { forbiddenCreateExplainer } from './access-review.ts';
import { describeCall, objectCalls, type Kind } from './lifecycle-calls.ts';
import type { KubernetesServiceConfig } from './config.ts';
import { MANAGED_LABEL_SELECTOR } from './labels.ts';
import { KubernetesRequestError, apiStatus, mapKubeError } from './lifecycle-errors.ts';
import { FLEET_LABEL, foreignReason, isManagedObject, notOwnedBy, ownerOf } from './lifecycle-owner.ts';
import { fleetSelector, iso, madeForSecret, podManifest, podToInstance } from './lifecycle-pod.ts';
import { holdsContents, secretManifest, withContents } from './lifecycle-secret.ts';
import { serviceEndpoint, serviceManifest } from './lifecycle-service.ts';
import { raceAbort, withSignal } from '../../clients/kubernetes/request-options.ts';
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
  const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const maxPages = options.maxPages ?? DEFAULT_MAX_PAGES;
  const serviceConfig = options.service;
  // Serialised once: an unchanged policy is the same string on every ensure, so it never rewrites the Secret.
  const policy = JSON.stringify(options.egressPolicy ?? proxyEgressPolicy(undefined, undefined));
  const log = options.logger.child({ component: 'kubernetes-lifecycle' });
  const { call, read, create, removeIfOurs } = objectCalls(api, forbiddenCreateExplainer(options.kubeConfig, log), log);
  const namespaceOf = (placement: string | undefined): string => placement ?? options.namespace;
  const allowed = options.namespaces ? [...new Set([options.namespace, ...options.namespaces])].sort() : undefined;
  /** Every page of a list, cluster-wide or in each allowed namespace. */
  async function* pages<T>(
    what: string,
    signal: AbortSignal,
    list: (namespace: string | undefined, page: { limit: number; _continue?: string }) => Promise<{ items: T[]; metadata?: { _continue?: string } }>,
  ): AsyncGenerator<T> {
    for (const namespace of allowed ?? [undefined]) {
      const where = namespace ? `${what} in namespace "${namespace}"` : what;
      const bound = new PageBound(where, maxPages);
      let token: string | undefined;
      do {
        const page = await call(where, signal, () => list(namespace, { limit: pageSize, ...(token ? { _continue: token } : {}) }));
        yield* page.items;
        token = bound.next(page.metadata?._continue);
      } while (token);
    }
  }

  /** Reads an object that a create just reported as existing; it must be there (and this proxy's). */
  async function readExisting<T extends { metadata?: V1ObjectMeta }>(kind: Kind, spec: InstanceSpec, namespace: string, signal: AbortSignal): Promise<T> {
    const found = await read<T>(kind, spec.name, namespace, signal);
    if (!found) {
      throw new KubernetesRequestError(
        `${describeCall('creating', kind, spec.name, namespace)}: it already existed, and was gone when read`,
        409,
        'AlreadyExists',
      );
    }
    refuseForeign(kind, found, spec, namespace);
    return found;
  }

  function refuseForeign(kind: Kind, obj: { metadata?: V1ObjectMeta }, spec: InstanceSpec, namespace: string): void {
    const why = foreignReason(kind, obj, spec.name, namespace, spec.owner);
    if (why) throw new ProvisioningError(why);
  }

  /** The Secret with these credentials and the policy: created, or updated when either changed. Values are never logged. */
  async function ensureSecret(spec: InstanceSpec, namespace: string, signal: AbortSignal): Promise<V1Secret> {
    let secret = await read<V1Secret>('Secret', spec.name, namespace, signal);
    if (!secret) {
      const made = await create('Secret', secretManifest(spec, namespace, policy), signal);
      if (made !== 'exists') {
        log.info({ instance: spec.name, namespace, proxy: spec.owner.proxy }, 'proxy Secret created');
        return made;
      }
      secret = await readExisting<V1Secret>('Secret', spec, namespace, signal);
    }
    refuseForeign('Secret', secret, spec, namespace);
    if (holdsContents(secret, { credentials: spec.credentials, policy })) return secret;
    // The resourceVersion read is the precondition. A 409 Conflict is a concurrent write: when it was a
    // duplicate ensure writing these same contents, continue from its Secret; otherwise retry later.
    const what = describeCall('updating', 'Secret', spec.name, namespace);
    try {
      const updated = await raceAbort(
        api.replaceNamespacedSecret({ name: spec.name, namespace, body: withContents(secret, spec, policy) }, withSignal(signal)),
        signal,
      );
      log.info({ instance: spec.name, namespace, proxy: spec.owner.proxy }, 'proxy credentials or egress policy changed: Secret updated, its Pod is replaced');
      return updated;
    } catch (err) {
      if (signal.aborted || apiStatus(err) !== 409) throw mapKubeError(err, what, signal);
      const now = await read<V1Secret>('Secret', spec.name, namespace, signal);
      if (now && isManagedObject(now) && holdsContents(now, { credentials: spec.credentials, policy })) return now;
      throw mapKubeError(err, what, signal);
    }
  }

  /** The Service in front of the Pod, created when missing, its type changed when the config changed. */
  async function ensureService(config: KubernetesServiceConfig, spec: InstanceSpec, namespace: string, signal: AbortSignal): Promise<V1Service> {
    let service = await read<V1Service>('Service', spec.name, namespace, signal);
    const desired = serviceManifest(spec, namespace, port, config);
    if (!service) {
      const made = await create('Service', desired, signal);
      if (made !== 'exists') {
        log.info({ instance: spec.name, namespace, proxy: spec.owner.proxy, type: config.type }, 'proxy Service created');
        return made;
      }
      service = await readExisting<V1Service>('Service', spec, namespace, signal);
    }
    refuseForeign('Service', service, spec, namespace);
    if (service.spec?.type === config.type) return service;
    const current = service;
    const body: V1Service = {
      ...desired,
      metadata: { ...current.metadata, labels: desired.metadata?.labels ?? {} },
      spec: { ...desired.spec, clusterIP: current.spec?.clusterIP },
    };
    const updated = await call(describeCall('updating', 'Service', spec.name, namespace), signal, () =>
      api.replaceNamespacedService({ name: spec.name, namespace, body }, withSignal(signal)),
    );
    log.info({ instance: spec.name, namespace, type: config.type }, 'proxy Service type changed');
    return updated;
  }

  /** The Pod as an Instance; with a Service configured, the endpoint is the Service's (or none yet). */
  function toInstance(pod: V1Pod, service: V1Service | undefined): Instance {
    const instance = podToInstance(pod, port);
    if (!serviceConfig) return instance;
    const { endpoint: _podEndpoint, ...rest } = instance;
    const found = service ? serviceEndpoint(service, serviceConfig) : { waiting: `Service "${instance.name}" is missing` };
    if ('endpoint' in found) return { ...rest, endpoint: found.endpoint };
    return rest.state === 'running' ? { ...rest, state: 'provisioning', message: found.waiting } : rest;
  }

  /** What is left of an instance whose Pod is gone: its Service or Secret (deleted next, or swept by GC). */
  function leftover(kind: 'Secret' | 'Service', obj: V1Secret | V1Service): Instance {
    return {
      name: obj.metadata?.name ?? '',
      id: obj.metadata?.uid ?? '',
      state: 'stopped',
      owner: ownerOf(obj),
      ...(obj.metadata?.namespace ? { placement: obj.metadata.namespace } : {}),
      createdAt: iso(obj.metadata?.creationTimestamp),
      message: `the Pod is gone; its ${kind} is left`,
    };
  }

  /** Deletes a Pod made for an older Secret; the next ensure creates it again from the current one. */
  async function replaceStalePod(pod: V1Pod, namespace: string, signal: AbortSignal): Promise<Instance> {
    const name = pod.metadata?.name ?? '';
    if (!pod.metadata?.deletionTimestamp) {
      try {
        await raceAbort(api.deleteNamespacedPod({ name, namespace }, withSignal(signal)), signal);
        log.info({ instance: name, namespace }, 'proxy Pod deleted: its credentials or egress policy changed, a new one replaces it');
      } catch (err) {
        if (signal.aborted || apiStatus(err) !== 404) throw mapKubeError(err, describeCall('deleting', 'Pod', name, namespace), signal);
      }
    }
    const { endpoint: _stale, ...rest } = podToInstance(pod, port);
    return { ...rest, state: 'stopping', message: `replacing Pod "${name}": its credentials or egress policy changed` };
  }

  return {
    async ensureInstance(spec, signal) {
      const namespace = namespaceOf(spec.placement);
      if (allowed && !allowed.includes(namespace)) {
        throw new ProvisioningError(
          `placement "${namespace}": expected one of the provider's namespaces (${allowed.map((n) => `"${n}"`).join(', ')}); add it to the provider's namespaces (and grant the provider's Role there)`,
        );
      }
      let pod = await read<V1Pod>('Pod', spec.name, namespace, signal);
      // A Pod that is not this proxy's is refused before anything is made next to it.
      if (pod) refuseForeign('Pod', pod, spec, namespace);
      const secret = await ensureSecret(spec, namespace, signal);
      const secretVersion = secret.metadata?.resourceVersion ?? '';
      const service = serviceConfig ? await ensureService(serviceConfig, spec, namespace, signal) : undefined;
      if (!pod) {
        const made = await create('Pod', podManifest(spec, { namespace, image, port }, secretVersion), signal);
        if (made !== 'exists') {
          log.info({ instance: spec.name, namespace, proxy: spec.owner.proxy, image }, 'proxy Pod created');
          return toInstance(made, service);
        }
        // A concurrent ensure created it between our read and our create: continue from what it made.
        pod = await readExisting<V1Pod>('Pod', spec, namespace, signal);
      }
      if (!madeForSecret(pod, secretVersion)) return replaceStalePod(pod, namespace, signal);
      return toInstance(pod, service);
    },

    async getInstance(name, placement, signal) {
      const namespace = namespaceOf(placement);
      const pod = await read<V1Pod>('Pod', name, namespace, signal);
      if (pod && isManagedObject(pod)) {
        const service = serviceConfig ? await read<V1Service>('Service', name, namespace, signal) : undefined;
        return toInstance(pod, service);
      }
      if (serviceConfig) {
        const service = await read<V1Service>('Service', name, namespace, signal);
        if (service && isManagedObject(service)) return leftover('Service', service);
      }
      const secret = await read<V1Secret>('Secret', name, namespace, signal);
      return secret && isManagedObject(secret) ? leftover('Secret', secret) : undefined;
    },

    async deleteInstance(name, placement, { owner }, signal) {
      const namespace = namespaceOf(placement);
      const pod = await read<V1Pod>('Pod', name, namespace, signal);
      const foreign = pod ? notOwnedBy(pod, owner) : undefined;
      if (foreign) {
        // Its Secret and Service are left too: they are the Pod's owner's business, whoever that is.
        log.warn({ instance: name, namespace, reason: foreign }, 'Pod is not ours; not deleting it');
        throw new ForeignInstanceError(name, `Pod in namespace "${namespace}": ${foreign}`);
      }
      if (pod) {
        if (!pod.metadata?.deletionTimestamp) {
          try {
            const body = pod.metadata?.uid ? { preconditions: { uid: pod.metadata.uid } } : undefined;
            await raceAbort(api.deleteNamespacedPod({ name, namespace, body }, withSignal(signal)), signal);
            log.info({ instance: name, namespace }, 'proxy Pod deleted');
          } catch (err) {
            if (signal.aborted || apiStatus(err) !== 404) throw mapKubeError(err, describeCall('deleting', 'Pod', name, namespace), signal);
          }
        }
        // A terminating Pod still runs with its Secret: the rest goes once the Pod is gone (a later call).
        const still = await read<V1Pod>('Pod', name, namespace, signal);
        if (still) return;
      }
      if (serviceConfig) await removeIfOurs('Service', name, namespace, owner, signal);
      await removeIfOurs('Secret', name, namespace, owner, signal);
    },

    async *listInstances(fleet, signal) {
      const labelSelector = fleetSelector(MANAGED_LABEL_SELECTOR, fleet);
      const ours = (o: { metadata?: V1ObjectMeta }): boolean => isManagedObject(o) && o.metadata?.labels?.[FLEET_LABEL] === fleet;
      const key = (o: { metadata?: V1ObjectMeta }): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
      const pods = new Set<string>();
      const podPages = pages<V1Pod>('listing proxy Pods', signal, (namespace, page) =>
        namespace
          ? api.listNamespacedPod({ namespace, labelSelector, ...page }, withSignal(signal))
          : api.listPodForAllNamespaces({ labelSelector, ...page }, withSignal(signal)),
      );
      for await (const pod of podPages) {
        // The server filtered already; checking again costs nothing and guards the "never touch" rule.
        if (!ours(pod)) continue;
        pods.add(key(pod));
        yield podToInstance(pod, port);
      }
      // A Secret whose Pod is gone (a crash between the two creates, a deletion cut short) is an instance
      // too, so that the sweep deletes it once no proxy owns it and it is past the grace period.
      const secretPages = pages<V1Secret>('listing proxy Secrets', signal, (namespace, page) =>
        namespace
          ? api.listNamespacedSecret({ namespace, labelSelector, ...page }, withSignal(signal))
          : api.listSecretForAllNamespaces({ labelSelector, ...page }, withSignal(signal)),
      );
      for await (const secret of secretPages) if (ours(secret) && !pods.has(key(secret))) yield leftover('Secret', secret);
    },
  };
}
