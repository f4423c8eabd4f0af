/**
 * The PoolStore conformance suite: the port's rules (src/store/pool-store.ts), written once and run
 * against the Redis store (the run's redis-server), the in-memory one the pure tests use, and the
 * Kubernetes store (ProxyPool custom resources in the fake kube-apiserver, the generated CRD
 * registered), so the pool reconcile and the API behave the same with `--store kubernetes` and on
 * the memory store. Then what kubectl sees of the Kubernetes store's pools.
 */
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyPoolCrd } from '../../src/crds/definitions.ts';
import { MEMBERS_FINALIZER } from '../../src/crds/resources.ts';
import { NotFoundError } from '../../src/errors.ts';
import { poolDocumentSchema, type PoolDocument, type PoolStatus } from '../../src/model/pool-resource.ts';
import { KubernetesPoolStore } from '../../src/store/kubernetes/pool-store.ts';
import { MemoryPoolStore } from '../../src/store/memory-pool-store.ts';
import { PoolTerminatingError, type PoolStore } from '../../src/store/pool-store.ts';
import { RedisPoolStore } from '../../src/store/redis-pool-store.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { kubernetesStoreHarness, memoryStoreHarness, redisStoreHarness, useStores, type StoreHarness } from './store-harness.ts';

type Harness = StoreHarness<PoolStore> & {
  /** Whether a change of labels alone moves the generation (Redis and memory: yes; Kubernetes moves it on spec changes only). */
  labelsMoveGeneration: boolean;
};

function redisHarness(): Harness {
  return { ...redisStoreHarness((redis, prefix) => new RedisPoolStore(redis, prefix)), labelsMoveGeneration: true };
}

function memoryHarness(): Harness {
  return { ...memoryStoreHarness(() => new MemoryPoolStore()), labelsMoveGeneration: true };
}

function kubernetesHarness(): Harness {
  return { ...kubernetesStoreHarness(proxyPoolCrd(), (kc) => new KubernetesPoolStore(kc, 'default')), labelsMoveGeneration: false };
}

/** A pool document as the API hands it to the store: parsed, defaults filled in. */
function doc(name: string, spec: Record<string, unknown> = {}, labels: Record<string, string> = {}): PoolDocument {
  return poolDocumentSchema.parse({ kind: 'ProxyPool', metadata: { name, labels }, spec: { replicas: 3, template: { spec: { provider: 'local' } }, ...spec } });
}

function counted(status: PoolStatus, ready: number): PoolStatus {
  return { ...status, desired: 3, current: 3, ready, observedGeneration: 1 };
}

const ended = (): AbortSignal => {
  const c = new AbortController();
  c.abort(new Error('job deadline'));
  return c.signal;
};

describe.each([redisHarness(), memoryHarness(), kubernetesHarness()])('PoolStore conformance: $name', (h) => {
  const make = useStores(h);

  it('starts empty: nothing to get or list; requestDeletion of nothing is NotFound; remove of nothing is no error', async () => {
    const store = await make();
    expect(await store.get('crawl')).toBeUndefined();
    expect(await store.list()).toEqual([]);
    await expect(store.requestDeletion('crawl')).rejects.toBeInstanceOf(NotFoundError);
    expect(await store.updateStatus('crawl', (p) => counted(p.status, 1))).toBeUndefined();
    await expect(store.remove('crawl')).resolves.toBeUndefined();
  });

  it('apply creates the pool at generation 1 with the empty status; get returns the same', async () => {
    const store = await make();
    const { pool, outcome } = await store.apply(doc('crawl', { maxAge: '30m', spread: [{ provider: 'gce', weight: 70 }] }, { team: 'crawl' }));
    expect(outcome).toBe('created');
    expect(pool).toMatchObject({
      name: 'crawl',
      labels: { team: 'crawl' },
      spec: {
        replicas: 3,
        maxAge: '30m',
        maxSurge: 1,
        spread: [{ provider: 'gce', weight: 70 }],
        template: { metadata: { labels: {} }, spec: { provider: 'local' } },
      },
      metadata: { generation: 1 },
      status: { desired: 0, current: 0, ready: 0, rotating: 0, failed: 0, conditions: [], observedGeneration: 0 },
    });
    expect(pool.metadata.uid).not.toBe('');
    expect(Number.isNaN(Date.parse(pool.metadata.createdAt))).toBe(false);
    expect(pool.metadata.deletionRequestedAt).toBeUndefined();
    expect(await store.get('crawl')).toEqual(pool);
  });

  it('apply again: unchanged keeps the generation; a spec change is configured and moves it; labels are configured', async () => {
    const store = await make();
    const { pool: created } = await store.apply(doc('crawl'));
    const same = await store.apply(doc('crawl'));
    expect(same.outcome).toBe('unchanged');
    expect(same.pool).toEqual(created);
    const scaled = await store.apply(doc('crawl', { replicas: 5 }));
    expect(scaled.outcome).toBe('configured');
    expect(scaled.pool.spec.replicas).toBe(5);
    expect(scaled.pool.metadata.generation).toBe(2);
    expect(scaled.pool.metadata.uid).toBe(created.metadata.uid);
    const relabelled = await store.apply(doc('crawl', { replicas: 5 }, { team: 'x' }));
    expect(relabelled.outcome).toBe('configured');
    expect(relabelled.pool.labels).toEqual({ team: 'x' });
    expect(relabelled.pool.metadata.generation).toBe(h.labelsMoveGeneration ? 3 : 2);
    expect(await store.get('crawl')).toEqual(relabelled.pool);
    // A template label is spec: it moves the generation everywhere.
    const templated = await store.apply(
      doc('crawl', { replicas: 5, template: { metadata: { labels: { tier: 'gold' } }, spec: { provider: 'local' } } }, { team: 'x' }),
    );
    expect(templated.outcome).toBe('configured');
    expect(templated.pool.metadata.generation).toBe(relabelled.pool.metadata.generation + 1);
    expect(
      (await store.apply(doc('crawl', { replicas: 5, template: { metadata: { labels: { tier: 'gold' } }, spec: { provider: 'local' } } }, { team: 'x' })))
        .outcome,
    ).toBe('unchanged');
  });

  it('lists every pool sorted by name', async () => {
    const store = await make();
    for (const name of ['web-b', 'api', 'web-a']) await store.apply(doc(name));
    expect((await store.list()).map((p) => p.name)).toEqual(['api', 'web-a', 'web-b']);
  });

  it('updateStatus writes the status and nothing else; undefined leaves it; the spec and generation stay', async () => {
    const store = await make();
    const { pool } = await store.apply(doc('crawl'));
    const written = await store.updateStatus('crawl', (current) => ({
      ...counted(current.status, 2),
      rotating: 1,
      conditions: [{ type: 'Ready', status: 'False', reason: 'MembersNotReady', message: '2 of 3 Ready', lastTransitionTime: '2026-12-01T10:00:00.000Z' }],
    }));
    expect(written?.status).toMatchObject({ desired: 3, current: 3, ready: 2, rotating: 1, failed: 0, observedGeneration: 1 });
    expect(written?.spec).toEqual(pool.spec);
    expect(written?.metadata.generation).toBe(1);
    expect(await store.get('crawl')).toEqual(written);
    expect(await store.updateStatus('crawl', () => undefined)).toEqual(written);
    expect((await store.apply(doc('crawl'))).outcome).toBe('unchanged');
  });

  it('concurrent status writers lose none of each other’s changes', async () => {
    const store = await make();
    await store.apply(doc('crawl'));
    const types = ['A', 'B', 'C', 'D', 'E', 'F'];
    await Promise.all(
      types.map((type) =>
        store.updateStatus('crawl', (current) => ({
          ...current.status,
          failed: current.status.failed + 1,
          conditions: [...current.status.conditions, { type, status: 'True', reason: 'Test', message: '', lastTransitionTime: '2026-12-01T10:00:00.000Z' }],
        })),
      ),
    );
    const status = (await store.get('crawl'))?.status;
    expect(status?.conditions.map((c) => c.type).sort()).toEqual(types);
    expect(status?.failed).toBe(types.length);
  });

  it('requestDeletion keeps the pool until remove; apply is refused meanwhile; status is still written; remove forgets it', async () => {
    const store = await make();
    await store.apply(doc('crawl'));
    const deleting = await store.requestDeletion('crawl');
    expect(deleting.metadata.deletionRequestedAt).toBeDefined();
    expect((await store.get('crawl'))?.metadata.deletionRequestedAt).toBe(deleting.metadata.deletionRequestedAt);
    await expect(store.apply(doc('crawl', { replicas: 1 }))).rejects.toBeInstanceOf(PoolTerminatingError);
    await expect(store.apply(doc('crawl'))).rejects.toMatchObject({ code: 'ERR_POOL_TERMINATING' });
    expect((await store.requestDeletion('crawl')).metadata.deletionRequestedAt).toBe(deleting.metadata.deletionRequestedAt);
    // The pool reconcile reports the members it is deleting.
    expect((await store.updateStatus('crawl', (p) => ({ ...p.status, current: 1 })))?.status.current).toBe(1);
    expect((await store.list()).map((p) => p.name)).toEqual(['crawl']);
    await store.remove('crawl');
    expect(await store.get('crawl')).toBeUndefined();
    expect(await store.list()).toEqual([]);
    expect(await store.updateStatus('crawl', (p) => p.status)).toBeUndefined();
    await store.remove('crawl');
    expect((await store.apply(doc('crawl'))).outcome).toBe('created');
  });

  it('a call whose signal has ended rejects and writes nothing', async () => {
    const store = await make();
    await expect(store.apply(doc('crawl'), ended())).rejects.toThrow('job deadline');
    await expect(store.list(ended())).rejects.toThrow('job deadline');
    expect(await store.list()).toEqual([]);
    await store.apply(doc('crawl'));
    await expect(store.requestDeletion('crawl', ended())).rejects.toThrow('job deadline');
    await expect(store.updateStatus('crawl', (p) => counted(p.status, 3), ended())).rejects.toThrow('job deadline');
    expect((await store.get('crawl'))?.status.ready).toBe(0);
    expect((await store.get('crawl'))?.metadata.deletionRequestedAt).toBeUndefined();
  });

  it('hands out copies: changing what it returned changes nothing stored', async () => {
    const store = await make();
    const { pool } = await store.apply(doc('crawl'));
    const kept = structuredClone(pool);
    pool.spec.replicas = 99;
    (await store.get('crawl'))!.status.conditions.push({
      type: 'X',
      status: 'True',
      reason: 'Test',
      message: '',
      lastTransitionTime: '2026-12-01T10:00:00.000Z',
    });
    (await store.list())[0]!.labels.team = 'mutated';
    expect(await store.get('crawl')).toEqual(kept);
  });

  it('two stores are separate: one never sees the other’s pools', async () => {
    const one = await make();
    const two = await make();
    await one.apply(doc('crawl'));
    expect(await two.get('crawl')).toBeUndefined();
    expect(await two.list()).toEqual([]);
  });
});

describe('PoolStore on Kubernetes: the objects as kubectl sees them', () => {
  const GROUP = { group: 'egress-proxies.io', version: 'v1alpha1', namespace: 'default', plural: 'proxypools' };
  let fake: FakeKubeApiserver;
  let store: KubernetesPoolStore;
  let crs: CustomObjectsApi;
  const object = (name: string) =>
    fake.getObject('egress-proxies.io', 'v1alpha1', 'proxypools', 'default', name) as unknown as
      { metadata: { finalizers?: string[]; deletionTimestamp?: string }; status?: unknown } | undefined;

  beforeAll(async () => {
    fake = await startFakeKubeApiserver();
    fake.registerCrd(proxyPoolCrd());
    store = new KubernetesPoolStore(fake.kubeConfig(), 'default');
    crs = fake.kubeConfig().makeApiClient(CustomObjectsApi);
  });
  afterAll(() => fake.close());

  it('apply: the pool carries the members finalizer, so a kubectl delete waits for the pool reconcile’s remove', async () => {
    await store.apply(doc('held'));
    expect(object('held')?.metadata.finalizers).toEqual([MEMBERS_FINALIZER]);
    await crs.deleteNamespacedCustomObject({ ...GROUP, name: 'held' });
    expect((await store.get('held'))?.metadata.deletionRequestedAt).toBeDefined();
    await store.remove('held');
    expect(object('held')).toBeUndefined();
  });

  it('a pool written with kubectl (no finalizer, no status) reads with the empty status and the CRD’s defaults; the first status write takes it over', async () => {
    await crs.createNamespacedCustomObject({
      ...GROUP,
      body: {
        apiVersion: 'egress-proxies.io/v1alpha1',
        kind: 'ProxyPool',
        metadata: { name: 'by-hand' },
        spec: { replicas: 2, template: { spec: { provider: 'local' } } },
      },
    });
    const read = await store.get('by-hand');
    expect(read?.status).toEqual({ desired: 0, current: 0, ready: 0, rotating: 0, failed: 0, conditions: [], observedGeneration: 0 });
    expect(read?.spec).toEqual({ replicas: 2, maxSurge: 1, template: { metadata: { labels: {} }, spec: { provider: 'local' } } });
    expect(object('by-hand')?.metadata.finalizers).toBeUndefined();
    // The same spec through the API is unchanged: the CRD filled in what the API's schema does.
    expect((await store.apply(doc('by-hand', { replicas: 2 }))).outcome).toBe('unchanged');
    const written = await store.updateStatus('by-hand', (p) => ({ ...p.status, desired: 2 }));
    expect(written?.status.desired).toBe(2);
    expect(object('by-hand')?.metadata.finalizers).toEqual([MEMBERS_FINALIZER]);
    expect(written?.metadata.generation).toBe(1);
    await store.requestDeletion('by-hand');
    expect(object('by-hand')?.metadata.deletionTimestamp).toBeDefined();
    await store.remove('by-hand');
    expect(object('by-hand')).toBeUndefined();
  });

  it('an API apply that changes a pool written with kubectl takes it over too (the finalizer, with the new spec)', async () => {
    await crs.createNamespacedCustomObject({
      ...GROUP,
      body: {
        apiVersion: 'egress-proxies.io/v1alpha1',
        kind: 'ProxyPool',
        metadata: { name: 'reapplied' },
        spec: { replicas: 1, template: { spec: { provider: 'local' } } },
      },
    });
    const { pool, outcome } = await store.apply(doc('reapplied', { replicas: 4 }));
    expect(outcome).toBe('configured');
    expect(pool.spec.replicas).toBe(4);
    expect(pool.metadata.generation).toBe(2);
    expect(object('reapplied')?.metadata.finalizers).toEqual([MEMBERS_FINALIZER]);
  });

  it('a kubectl-made pool deleted before any reconcile is gone at once: requestDeletion still reports it as being deleted', async () => {
    await crs.createNamespacedCustomObject({
      ...GROUP,
      body: {
        apiVersion: 'egress-proxies.io/v1alpha1',
        kind: 'ProxyPool',
        metadata: { name: 'brief' },
        spec: { replicas: 1, template: { spec: { provider: 'local' } } },
      },
    });
    expect((await store.requestDeletion('brief')).metadata.deletionRequestedAt).toBeDefined();
    expect(await store.get('brief')).toBeUndefined();
  });
});
