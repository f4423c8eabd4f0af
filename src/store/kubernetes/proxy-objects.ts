import type { V1Secret } from '@kubernetes/client-node';
import type { Proxy, ProxySpec, ProxyStatus } from '../../model/proxy-resource.ts';
import { GROUP_VERSION, ORPHAN_ANNOTATION, PROXY_LABEL, proxyResourceSpecSchema, proxyResourceStatusSchema } from '../../crds/resources.ts';
import { beyondSkew, clampConditions, clampTime, fieldsThatPass, partReader, type ReadContext } from './read-back.ts';
import type { CustomObject } from './resource-client.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

/** A Proxy's status as the custom resource holds it: the domain status plus the credentials Secret's name. */
export type ResourceStatus = ProxyStatus & { credentialsSecretRef?: { name: string } };
export type ProxyObject = CustomObject<ProxySpec, ResourceStatus>;

/** The Secret (in the Proxy's namespace) that holds a proxy's credentials. */
export function secretName(proxy: string): string {
  return `${proxy}-proxy-credentials`;
}

/** The status of a Proxy nobody has written one for. */
function initialStatus(): ProxyStatus {
  return { phase: 'Pending', conditions: [], observedGeneration: 0 };
}

const readSpec = partReader('spec', proxyResourceSpecSchema);
const readStatus = partReader('status', proxyResourceStatusSchema);
const PROXY_KIND = 'Proxy';

/**
 * The status a Proxy object holds, as far as it can be trusted: one that breaks the API's schema
 * (`conditions` not a list, a phase no release writes, `status: 5`) is no status at all, as before
 * the first status write (Pending; reconcile derives a new one from the instance); times later than
 * the clock skew allows are clamped to now. They only measure ages (since when unready, since the
 * last flip), so a clamped time is written back on the next status write and ages from there.
 */
export function storedStatus(obj: ProxyObject, ctx: ReadContext): ProxyStatus {
  if (obj.status === undefined) return initialStatus();
  const read = readStatus(obj.status);
  if (!read.ok) {
    ctx.log?.report(PROXY_KIND, obj.metadata, 'its status breaks the schema and is ignored (it reads as Pending until reconcile writes one)', read.problems);
    return initialStatus();
  }
  const { credentialsSecretRef: _ref, ...status } = read.value;
  const late = [
    ...status.conditions.flatMap((c, i) => (beyondSkew(c.lastTransitionTime, ctx.now) ? [`status.conditions[${i}].lastTransitionTime`] : [])),
    ...(status.unreadySince !== undefined && beyondSkew(status.unreadySince, ctx.now) ? ['status.unreadySince'] : []),
  ];
  if (late.length === 0) return status;
  ctx.log?.report(PROXY_KIND, obj.metadata, 'times in the future, clamped to now', late);
  return {
    ...status,
    conditions: clampConditions(status.conditions, ctx.now),
    ...(status.unreadySince === undefined ? {} : { unreadySince: clampTime(status.unreadySince, ctx.now) }),
  };
}

/**
 * The domain Proxy of a custom resource. Kubernetes keeps what the Redis store kept in `metadata`:
 * the uid, the generation (moved by the API server on spec changes), the creation time, the deletion
 * request (`deletionTimestamp`) and `--orphan` (an annotation). A Proxy made with `kubectl apply` has
 * no status until reconcile writes one: it reads as Pending. One being deleted reads as Terminating.
 *
 * The spec and status pass the API's schemas first (read-back.ts). A spec that breaks them never
 * reaches a lifecycle: the Proxy carries `specProblems` (its reconcile fails it with them) and, for
 * readers such as GC and listings, a spec of the fields that passed. The status is `storedStatus`.
 */
export function toProxy(obj: ProxyObject, ctx: ReadContext): Proxy {
  const spec = readSpec(obj.spec);
  if (!spec.ok) ctx.log?.report(PROXY_KIND, obj.metadata, 'its spec breaks the schema; its reconcile fails it', spec.problems);
  const stored = storedStatus(obj, ctx);
  const meta = obj.metadata;
  const deleting = meta.deletionTimestamp !== undefined;
  return {
    name: meta.name,
    labels: { ...(meta.labels ?? {}) },
    spec: spec.ok ? { ...spec.value } : fieldsThatPass<ProxySpec>(proxyResourceSpecSchema.shape, obj.spec, { provider: '' }),
    ...(spec.ok ? {} : { specProblems: spec.problems }),
    metadata: {
      uid: meta.uid ?? '',
      generation: meta.generation ?? 1,
      createdAt: meta.creationTimestamp ?? '',
      ...(deleting ? { deletionRequestedAt: meta.deletionTimestamp } : {}),
      ...(meta.annotations?.[ORPHAN_ANNOTATION] === 'true' ? { orphanInstance: true } : {}),
    },
    status: deleting ? { ...stored, phase: 'Terminating' } : stored,
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
