/**
 * The ensure path of the kubernetes lifecycle in one namespace: the Secret (credentials and policy),
 * the Service when configured, then the Pod made for that version of the Secret. An object of the
 * instance's name that is not this proxy's is refused before anything is made next to it; a Pod made
 * for an older Secret is deleted, and the next ensure creates it again. Every create that finds the
 * object already there (a concurrent or crashed ensure) continues from what is there.
 */
import type { CoreV1Api, V1ObjectMeta, V1Pod, V1Secret, V1Service } from '@kubernetes/client-node';
import type { Logger } from '../../logging.ts';
import { ProvisioningError, type Instance, type InstanceSpec } from '../lifecycle.ts';
import { raceAbort, withSignal } from '../../clients/kubernetes/request-options.ts';
import type { KubernetesServiceConfig } from './config.ts';
import { servedInstance } from './instance-view.ts';
import { describeCall, type Kind, type ObjectCalls } from './lifecycle-calls.ts';
import { KubernetesRequestError, apiStatus, mapKubeError } from './lifecycle-errors.ts';
import { foreignReason, isManagedObject } from './lifecycle-owner.ts';
import { madeForSecret, podManifest, podToInstance } from './lifecycle-pod.ts';
import { holdsContents, secretManifest, withContents } from './lifecycle-secret.ts';
import { serviceManifest } from './lifecycle-service.ts';

export interface ObjectsEnsurerDeps {
  api: CoreV1Api;
  calls: ObjectCalls;
  log: Logger;
  /** The forward-proxy image of new Pods. */
  image: string;
  /** Port the forward proxy listens on in the Pod (and the Service's port). */
  port: number;
  /** The egress policy document (policy-document.ts). */
  policy: string;
  service: KubernetesServiceConfig | undefined;
}

export type EnsureObjects = (spec: InstanceSpec, namespace: string, signal: AbortSignal) => Promise<Instance>;

export function objectsEnsurer(deps: ObjectsEnsurerDeps): EnsureObjects {
  const { api, log, image, port, policy } = deps;
  const { call, read, create } = deps.calls;
  const serviceConfig = deps.service;

  function refuseForeign(kind: Kind, obj: { metadata?: V1ObjectMeta }, spec: InstanceSpec, namespace: string): void {
    const why = foreignReason(kind, obj, spec.name, namespace, spec.owner);
    if (why) throw new ProvisioningError(why);
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

  return async (spec, namespace, signal) => {
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
        return servedInstance(made, service, port, serviceConfig);
      }
      // A concurrent ensure created it between our read and our create: continue from what it made.
      pod = await readExisting<V1Pod>('Pod', spec, namespace, signal);
    }
    if (!madeForSecret(pod, secretVersion)) return replaceStalePod(pod, namespace, signal);
    return servedInstance(pod, service, port, serviceConfig);
  };
}
