import type { KubeConfig } from '@kubernetes/client-node';
import { emptyPoolStatus, type Pool, type PoolDocument, type PoolSpec, type PoolStatus } from '../../model/pool-resource.ts';
import { GROUP_VERSION, MEMBERS_FINALIZER } from '../../crds/resources.ts';
import { PoolTerminatingError, type PoolStore } from '../pool-store.ts';
import type { ApplyOutcome } from '../proxy-store.ts';
import { deleteAndRead, releaseObject, replaceDesired, retryOnConflict, withFinalizer, writeStatus, type ObjectRef } from './optimistic-writes.ts';
import { ResourceClient, type CustomObject } from './resource-client.ts';

export type PoolObject = CustomObject<PoolSpec, PoolStatus>;

const POOL: ObjectRef = { kind: 'ProxyPool', noun: 'pool' };

const never = new AbortController().signal;

function byName(a: Pool, b: Pool): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/**
 * The domain Pool of a custom resource: uid, generation (moved by the API server on spec changes only),
 * creation time and the deletion request (`deletionTimestamp`) come from `metadata`. A pool made with
 * `kubectl apply` has no status until the pool reconcile writes one: it reads as the empty status.
 */
export function toPool(obj: PoolObject): Pool {
  const meta = obj.metadata;
  return {
    name: meta.name,
    labels: { ...(meta.labels ?? {}) },
    spec: structuredClone(obj.spec as PoolSpec),
    metadata: {
      uid: meta.uid ?? '',
      generation: meta.generation ?? 1,
      createdAt: meta.creationTimestamp ?? '',
      ...(meta.deletionTimestamp !== undefined ? { deletionRequestedAt: meta.deletionTimestamp } : {}),
    },
    status: obj.status ? { ...obj.status, conditions: obj.status.conditions ?? [] } : emptyPoolStatus(),
  };
}

/**
 * ProxyPools as namespaced custom resources (`kubectl get pxp`), for `--store kubernetes`: the objects
 * are the desired state, whoever writes them (this store's `apply`, or `kubectl apply`). Member Proxies
 * are Proxy objects in the same namespace, labelled `egress-proxies.io/pool`; this store never reads them.
 *
 * - `apply` creates the ProxyPool with the finalizer `egress-proxies.io/members`, or replaces its spec
 *   and labels with the resourceVersion it read. The API server moves `metadata.generation` on spec
 *   changes only: a label change alone is `configured` without a new generation.
 * - `requestDeletion` is a Kubernetes delete: the finalizer keeps the pool (Terminating) until the pool
 *   reconcile has deleted its members and calls `remove`, which drops it.
 * - `updateStatus` writes through the status subresource only. A pool made with `kubectl apply` has no
 *   finalizer: the first status write of the pool reconcile adds it first (takes the pool over), so that
 *   from then on `kubectl delete` waits for the members.
 * - Every write carries the resourceVersion it read; a 409 reads again, at most MAX_ATTEMPTS times.
 */
export class KubernetesPoolStore implements PoolStore {
  readonly #pools: ResourceClient<PoolSpec, PoolStatus>;

  constructor(kc: KubeConfig, namespace: string) {
    this.#pools = new ResourceClient(kc, { plural: 'proxypools', namespace });
  }

  async get(name: string, signal: AbortSignal = never): Promise<Pool | undefined> {
    const obj = await this.#pools.get(name, signal);
    return obj && toPool(obj);
  }

  async list(signal: AbortSignal = never): Promise<Pool[]> {
    const { items } = await this.#pools.list(signal);
    return items.map(toPool).sort(byName);
  }

  async apply(doc: PoolDocument, signal: AbortSignal = never): Promise<{ pool: Pool; outcome: ApplyOutcome }> {
    const name = doc.metadata.name;
    // As the API server stores it: no keys whose value is undefined.
    const spec = JSON.parse(JSON.stringify(doc.spec)) as PoolSpec;
    const labels = { ...doc.metadata.labels };
    return retryOnConflict(this.#pools.what('applying', name), `ProxyPool "${name}"`, signal, async () => {
      const current = await this.#pools.get(name, signal);
      if (!current) {
        const created = await this.#pools.create(
          { apiVersion: GROUP_VERSION, kind: 'ProxyPool', metadata: { name, labels, finalizers: [MEMBERS_FINALIZER] }, spec },
          signal,
        );
        return { pool: toPool(created), outcome: 'created' };
      }
      if (current.metadata.deletionTimestamp) throw new PoolTerminatingError(name);
      const updated = await replaceDesired(this.#pools, current, { spec, labels }, MEMBERS_FINALIZER, signal);
      return updated ? { pool: toPool(updated), outcome: 'configured' } : { pool: toPool(current), outcome: 'unchanged' };
    });
  }

  async requestDeletion(name: string, signal: AbortSignal = never): Promise<Pool> {
    return toPool(await deleteAndRead(this.#pools, POOL, name, signal));
  }

  async updateStatus(name: string, update: (current: Pool) => Pool['status'] | undefined, signal: AbortSignal = never): Promise<Pool | undefined> {
    // A pool made with kubectl is taken over first (the finalizer): from then on its deletion waits for the members.
    const written = await writeStatus(
      this.#pools,
      POOL,
      name,
      (obj) => update(toPool(obj)),
      signal,
      (obj) => withFinalizer(obj, MEMBERS_FINALIZER),
    );
    return written && toPool(written);
  }

  /** Drops the finalizer (deleting the pool first if nobody had), so Kubernetes removes it. */
  remove(name: string, signal: AbortSignal = never): Promise<void> {
    return releaseObject(this.#pools, POOL, name, MEMBERS_FINALIZER, signal);
  }

  /** Nothing to wait for: every write is awaited by its caller. */
  async close(): Promise<void> {}
}
