import type { V1Secret } from '@kubernetes/client-node';
import type { ProxyCredentials } from '../../providers/lifecycle.ts';
import type { Proxy, ProxySpec, ProxyStatus } from '../../model/proxy-resource.ts';
import { GROUP_VERSION, ORPHAN_ANNOTATION, PROXY_LABEL } from '../../crds/resources.ts';
import type { CustomObject } from './resource-client.ts';

/** A Proxy's status as the custom resource holds it: the domain status plus the credentials Secret's name. */
export type ResourceStatus = ProxyStatus & { credentialsSecretRef?: { name: string } };
export type ProxyObject = CustomObject<ProxySpec, ResourceStatus>;

/** The Secret (in the Proxy's namespace) that holds a proxy's credentials. */
export function secretName(proxy: string): string {
  return `${proxy}-proxy-credentials`;
}

const INITIAL_STATUS: ResourceStatus = { phase: 'Pending', conditions: [], observedGeneration: 0 };

/**
 * The domain Proxy of a custom resource. Kubernetes keeps what the Redis store kept in `metadata`:
 * the uid, the generation (moved by the API server on spec changes), the creation time, the deletion
 * request (`deletionTimestamp`) and `--orphan` (an annotation). A Proxy made with `kubectl apply` has
 * no status until reconcile writes one: it reads as Pending. One being deleted reads as Terminating.
 */
export function toProxy(obj: ProxyObject): Proxy {
  const { credentialsSecretRef: _ref, ...stored } = obj.status ?? INITIAL_STATUS;
  const meta = obj.metadata;
  const deleting = meta.deletionTimestamp !== undefined;
  return {
    name: meta.name,
    labels: { ...(meta.labels ?? {}) },
    spec: { ...(obj.spec as ProxySpec) },
    metadata: {
      uid: meta.uid ?? '',
      generation: meta.generation ?? 1,
      createdAt: meta.creationTimestamp ?? '',
      ...(deleting ? { deletionRequestedAt: meta.deletionTimestamp } : {}),
      ...(meta.annotations?.[ORPHAN_ANNOTATION] === 'true' ? { orphanInstance: true } : {}),
    },
    status: { ...stored, conditions: stored.conditions ?? [], ...(deleting ? { phase: 'Terminating' } : {}) },
  };
}

export function newProxyObject(name: string, spec: ProxySpec, labels: Record<string, string>, finalizer: string): ProxyObject {
  return { apiVersion: GROUP_VERSION, kind: 'Proxy', metadata: { name, labels, finalizers: [finalizer] }, spec };
}

export function credentialsSecret(proxy: string, credentials: ProxyCredentials): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: secretName(proxy), labels: { [PROXY_LABEL]: proxy } },
    type: 'Opaque',
    data: { username: Buffer.from(credentials.username).toString('base64'), password: Buffer.from(credentials.password).toString('base64') },
  };
}

export function credentialsOfSecret(secret: V1Secret | undefined): ProxyCredentials | undefined {
  const username = secret?.data?.username;
  const password = secret?.data?.password;
  if (username === undefined || password === undefined) return undefined;
  return { username: Buffer.from(username, 'base64').toString('utf8'), password: Buffer.from(password, 'base64').toString('utf8') };
}

/** True when the Secret is already owned by this Proxy object (by uid). */
export function ownedBy(secret: V1Secret, proxy: ProxyObject): boolean {
  return (secret.metadata?.ownerReferences ?? []).some((r) => r.uid === proxy.metadata.uid);
}

export function withOwner(secret: V1Secret, proxy: ProxyObject): V1Secret {
  const owners = (secret.metadata?.ownerReferences ?? []).filter((r) => !(r.kind === 'Proxy' && r.apiVersion === GROUP_VERSION));
  return {
    ...secret,
    metadata: {
      ...secret.metadata,
      ownerReferences: [
        ...owners,
        { apiVersion: GROUP_VERSION, kind: 'Proxy', name: proxy.metadata.name, uid: proxy.metadata.uid ?? '', controller: true, blockOwnerDeletion: true },
      ],
    },
  };
}
