import type { KubeConfig } from '@kubernetes/client-node';
import { emptyPoolStatus, type Pool, type PoolDocument, type PoolSpec, type PoolStatus } from '../../model/pool-resource.ts';
import { GROUP_VERSION, MEMBERS_FINALIZER, poolResourceSpecSchema, poolResourceStatusSchema } from '../../crds/resources.ts';
import { PoolTerminatingError, type PoolStore } from '../pool-store.ts';
import type { ApplyOutcome } from '../proxy-store.ts';
import { deleteAndRead, releaseObject, replaceDesired, retryOnConflict, withFinalizer, writeStatus, type ObjectRef } from './optimistic-writes.ts';
import { ReadBackLog, beyondSkew, clampConditions, fieldsThatPass, partReader, type KubernetesStoreOptions, type ReadContext } from './read-back.ts';
import { ResourceClient, type CustomObject } from './resource-client.ts';

export type PoolObject = CustomObject<PoolSpec, PoolStatus>;

const POOL: ObjectRef = { kind: 'ProxyPool', noun: 'pool' };

const never = new AbortController().signal;

function byName(a: Pool, b: Pool): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

const readSpec = partReader('spec', poolResourceSpecSchema);
const readStatus = partReader('status', poolResourceStatusSchema);

/** What a pool's spec reads as when it breaks the schema: the fields that passed, no replicas otherwise. */
const FALLBACK_SPEC: PoolSpec = { replicas: 0, template: { metadata: { labels: {} }, spec: {} }, maxSurge: 1 };

/**
 * The status a ProxyPool object holds, as far as it can be trusted: one that breaks the API's schema
 * is no status (the empty one, as before the first status write; the pool reconcile writes a new
 * one), and condition times later than the clock skew allows are clamped to now.
 */
function storedStatus(obj: PoolObject, ctx: ReadContext): PoolStatus {
  if (obj.status === undefined) return emptyPoolStatus();
  const read = readStatus(obj.status);
  if (!read.ok) {
    ctx.log?.report(
      POOL.kind,
      obj.metadata,
      'its status breaks the schema and is ignored (it reads as empty until the pool reconcile writes one)',
      read.problems,
    );
    return emptyPoolStatus();
  }
  const late = read.value.conditions.flatMap((c, i) => (beyondSkew(c.lastTransitionTime, ctx.now) ? [`status.conditions[${i}].lastTransitionTime`] : []));
  if (late.length === 0) return read.value;
  ctx.log?.report(POOL.kind, obj.metadata, 'times in the future, clamped to now', late);
  return { ...read.value, conditions: clampConditions(read.value.conditions, ctx.now) };
}

/**
 * The domain Pool of a custom resource: uid, generation (moved by the API server on spec changes only),
 * creation time and the deletion request (`deletionTimestamp`) come from `metadata`. A pool made with
 * `kubectl apply` has no status until the pool reconcile writes one: it reads as the empty status.
 *
 * The spec and status pass the API's schemas first (read-back.ts): a spec that breaks them makes the
 * pool carry `specProblems` (the pool reconcile makes no members and reports them) and a spec of the
 * fields that passed.
 */
export function toPool(obj: PoolObject, ctx: ReadContext): Pool {
  const meta = obj.metadata;
  const spec = readSpec(obj.spec);
  if (!spec.ok) ctx.log?.report(POOL.kind, meta, 'its spec breaks the schema; the pool reconcile makes no members', spec.problems);
  return {
    name: meta.name,
    labels: { ...(meta.labels ?? {}) },
    spec: spec.ok ? spec.value : fieldsThatPass(poolResourceSpecSchema.shape, obj.spec, structuredClone(FALLBACK_SPEC)),
    ...(spec.ok ? {} : { specProblems: spec.problems }),
    metadata: {
      uid: meta.uid ?? '',
      generation: meta.generation ?? 1,
      createdAt: meta.creationTimestamp ?? '',
      ...(meta.deletionTimestamp !== undefined ? { deletionRequestedAt: meta.deletionTimestamp } : {}),
    },
    status: storedStatus(obj, ctx),
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
  readonly #now: () => Date;
  readonly #log: ReadBackLog;

  constructor(kc: KubeConfig, namespace: string, options: KubernetesStoreOptions = {}) {
    this.#pools = new ResourceClient(kc, { plural: 'proxypools', namespace });
    this.#now = options.now ?? (() => new Date());
    this.#log = new ReadBackLog(options.logger);
  }

  /** Every object read back becomes a Pool here: validated against the API's schemas and this clock. */
  #read(): (obj: PoolObject) => Pool {
    const ctx: ReadContext = { now: this.#now(), log: this.#log };
    return (obj) => toPool(obj, ctx);
  }

  async get(name: string, signal: AbortSignal = never): Promise<Pool | undefined> {
    const obj = await this.#pools.get(name, signal);
    return obj && this.#read()(obj);
  }

  async list(signal: AbortSignal = never): Promise<Pool[]> {
    const { items } = await this.#pools.list(signal);
    return items.map(this.#read()).sort(byName);
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
        return { pool: this.#read()(created), outcome: 'created' };
      }
      if (current.metadata.deletionTimestamp) throw new PoolTerminatingError(name);
      const updated = await replaceDesired(this.#pools, current, { spec, labels }, MEMBERS_FINALIZER, signal);
      return updated ? { pool: this.#read()(updated), outcome: 'configured' } : { pool: this.#read()(current), outcome: 'unchanged' };
    });
  }

  async requestDeletion(name: string, signal: AbortSignal = never): Promise<Pool> {
    return this.#read()(await deleteAndRead(this.#pools, POOL, name, signal));
  }

  async updateStatus(name: string, update: (current: Pool) => Pool['status'] | undefined, signal: AbortSignal = never): Promise<Pool | undefined> {
    // A pool made with kubectl is taken over first (the finalizer): from then on its deletion waits for the members.
    const written = await writeStatus(
      this.#pools,
      POOL,
      name,
      (obj) => update(this.#read()(obj)),
      signal,
      (obj) => withFinalizer(obj, MEMBERS_FINALIZER),
    );
    return written && this.#read()(written);
  }

  /** Drops the finalizer (deleting the pool first if nobody had), so Kubernetes removes it. */
  remove(name: string, signal: AbortSignal = never): Promise<void> {
    return releaseObject(this.#pools, POOL, name, MEMBERS_FINALIZER, signal);
  }

  /** Nothing to wait for: every write is awaited by its caller. */
  async close(): Promise<void> {}
}
