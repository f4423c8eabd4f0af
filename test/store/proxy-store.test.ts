/**
 * The ProxyStore conformance suite: the port's rules (src/store/proxy-store.ts), written once and run
 * against the Redis store (the run's redis-server), the in-memory one the pure tests use, and the
 * Kubernetes store (Proxy custom resources and Secrets in the fake kube-apiserver, the generated CRD
 * registered), so `--store kubernetes` behaves for reconcile and the API as the Redis store does,
 * and a suite on the memory store means what it would on Redis.
 */
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyCrd } from '../../src/crds/definitions.ts';
import { INSTANCE_FINALIZER, ORPHAN_ANNOTATION } from '../../src/crds/resources.ts';
import { NotFoundError } from '../../src/errors.ts';
import { POOL_LABEL } from '../../src/model/pool-resource.ts';
import type { ProxyDocument } from '../../src/model/proxy-resource.ts';
import { KubernetesProxyStore } from '../../src/store/kubernetes/proxy-store.ts';
import { MemoryProxyStore } from '../../src/store/memory-proxy-store.ts';
import { ProxyTerminatingError, type ProxyStore } from '../../src/store/proxy-store.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { kubernetesStoreHarness, memoryStoreHarness, redisStoreHarness, useStores, type StoreHarness } from './store-harness.ts';

type Harness = StoreHarness<ProxyStore> & {
  /** Whether the store keeps a change feed (`changesSince`: Redis and memory; Kubernetes readers list the pools' Proxies instead). */
  changeFeed: boolean;
};

function redisHarness(): Harness {
  return { ...redisStoreHarness((redis, prefix) => new RedisProxyStore(redis, prefix)), changeFeed: true };
}

function memoryHarness(): Harness {
  return { ...memoryStoreHarness(() => new MemoryProxyStore()), changeFeed: true };
}

function kubernetesHarness(): Harness {
  return { ...kubernetesStoreHarness(proxyCrd(), (kc) => new KubernetesProxyStore(kc, 'default')), changeFeed: false };
}

function doc(name: string, spec: ProxyDocument['spec'] = { provider: 'local' }, labels: Record<string, string> = {}): ProxyDocument {
  return { metadata: { name, labels }, spec };
}

const ended = (): AbortSignal => {
  const c = new AbortController();
  c.abort(new Error('job deadline'));
  return c.signal;
};

describe.each([redisHarness(), memoryHarness(), kubernetesHarness()])('ProxyStore conformance: $name', (h) => {
  const make = useStores(h);

  it('starts empty: nothing to get, list or delete; remove of nothing is no error', async () => {
    const store = await make();
    expect(await store.get('web')).toBeUndefined();
    expect(await store.getMany(['web', 'api'])).toEqual([undefined, undefined]);
    expect(await store.list()).toEqual([]);
    expect(await store.credentials('web')).toBeUndefined();
    await expect(store.requestDeletion('web')).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.remove('web')).resolves.toBeUndefined();
  });

  it('apply creates a Pending proxy at generation 1, with credentials made before it; get returns the same', async () => {
    const store = await make();
    const { proxy, outcome } = await store.apply(doc('web', { provider: 'local', placement: 'here' }, { team: 'crawl' }));
    expect(outcome).toBe('created');
    expect(proxy).toMatchObject({
      name: 'web',
      labels: { team: 'crawl' },
      spec: { provider: 'local', placement: 'here' },
      metadata: { generation: 1 },
      status: { phase: 'Pending', conditions: [], observedGeneration: 0 },
    });
    expect(proxy.metadata.uid).not.toBe('');
    expect(proxy.metadata.deletionRequestedAt).toBeUndefined();
    expect(await store.get('web')).toEqual(proxy);
    const credentials = await store.credentials('web');
    expect(credentials?.username).toBe('egress-web');
    expect(credentials?.password.length).toBeGreaterThanOrEqual(32);
    expect(await store.credentialsOf(['web', 'none'])).toEqual([credentials, undefined]);
  });

  it('apply again: unchanged keeps the generation; a spec change is configured and moves it; credentials stay', async () => {
    const store = await make();
    await store.apply(doc('web'));
    const credentials = await store.credentials('web');
    const same = await store.apply(doc('web'));
    expect(same.outcome).toBe('unchanged');
    expect(same.proxy.metadata.generation).toBe(1);
    const moved = await store.apply(doc('web', { provider: 'gce' }));
    expect(moved.outcome).toBe('configured');
    expect(moved.proxy.spec).toEqual({ provider: 'gce' });
    expect(moved.proxy.metadata.generation).toBe(2);
    const relabelled = await store.apply(doc('web', { provider: 'gce' }, { team: 'x' }));
    expect(relabelled.outcome).toBe('configured');
    expect((await store.get('web'))?.labels).toEqual({ team: 'x' });
    expect(await store.credentials('web')).toEqual(credentials);
  });

  it('lists every proxy sorted by name; getMany answers in the order asked', async () => {
    const store = await make();
    for (const name of ['web-b', 'api', 'web-a']) await store.apply(doc(name));
    expect((await store.list()).map((p) => p.name)).toEqual(['api', 'web-a', 'web-b']);
    expect((await store.getMany(['web-a', 'none', 'api'])).map((p) => p?.name)).toEqual(['web-a', undefined, 'api']);
  });

  it('updateStatus writes the status and nothing else; undefined leaves it; a proxy that is gone stays gone', async () => {
    const store = await make();
    const { proxy } = await store.apply(doc('web'));
    const written = await store.updateStatus('web', (current) => ({
      ...current.status,
      phase: 'Ready',
      url: 'http://127.0.0.1:3128',
      observedGeneration: current.metadata.generation,
      conditions: [{ type: 'Ready', status: 'True', reason: 'ProbeSucceeded', message: 'ok', lastTransitionTime: '2026-12-01T10:00:00.000Z' }],
    }));
    expect(written?.status).toMatchObject({ phase: 'Ready', url: 'http://127.0.0.1:3128', observedGeneration: 1 });
    expect(written?.spec).toEqual(proxy.spec);
    expect(written?.metadata.generation).toBe(1);
    expect(await store.get('web')).toEqual(written);
    expect(await store.updateStatus('web', () => undefined)).toEqual(written);
    expect(await store.updateStatus('none', (c) => ({ ...c.status, phase: 'Ready' }))).toBeUndefined();
    expect(await store.get('none')).toBeUndefined();
  });

  it('concurrent status writers lose none of each other’s changes', async () => {
    const store = await make();
    await store.apply(doc('web'));
    const types = ['A', 'B', 'C', 'D', 'E', 'F'];
    await Promise.all(
      types.map((type) =>
        store.updateStatus('web', (current) => ({
          ...current.status,
          conditions: [...current.status.conditions, { type, status: 'True', reason: 'Test', message: '', lastTransitionTime: '2026-12-01T10:00:00.000Z' }],
        })),
      ),
    );
    expect((await store.get('web'))?.status.conditions.map((c) => c.type).sort()).toEqual(types);
  });

  it('requestDeletion keeps the proxy, Terminating, until remove; apply is refused meanwhile; remove forgets it and its credentials', async () => {
    const store = await make();
    await store.apply(doc('web'));
    const deleting = await store.requestDeletion('web');
    expect(deleting.status.phase).toBe('Terminating');
    expect(deleting.metadata.deletionRequestedAt).toBeDefined();
    expect(deleting.metadata.orphanInstance).toBeUndefined();
    expect((await store.get('web'))?.status.phase).toBe('Terminating');
    await expect(store.apply(doc('web', { provider: 'gce' }))).rejects.toBeInstanceOf(ProxyTerminatingError);
    expect((await store.requestDeletion('web')).metadata.deletionRequestedAt).toBe(deleting.metadata.deletionRequestedAt);
    expect((await store.requestDeletion('web', { orphan: true })).metadata.orphanInstance).toBe(true);
    await store.remove('web');
    expect(await store.get('web')).toBeUndefined();
    expect(await store.list()).toEqual([]);
    expect(await store.credentials('web')).toBeUndefined();
    await store.remove('web');
    expect((await store.apply(doc('web'))).outcome).toBe('created');
  });

  it('requestDeletion with orphan marks the proxy to be forgotten without removing its instance', async () => {
    const store = await make();
    await store.apply(doc('web'));
    const orphaned = await store.requestDeletion('web', { orphan: true });
    expect(orphaned.metadata.orphanInstance).toBe(true);
    expect(orphaned.status.phase).toBe('Terminating');
  });

  it('a call whose signal has ended rejects and writes nothing', async () => {
    const store = await make();
    await expect(store.apply(doc('web'), ended())).rejects.toThrow('job deadline');
    await expect(store.list(ended())).rejects.toThrow('job deadline');
    expect(await store.list()).toEqual([]);
    await store.apply(doc('web'));
    await expect(store.requestDeletion('web', {}, ended())).rejects.toThrow('job deadline');
    await expect(store.updateStatus('web', (c) => ({ ...c.status, phase: 'Ready' }), ended())).rejects.toThrow('job deadline');
    expect((await store.get('web'))?.status.phase).toBe('Pending');
  });

  it('hands out copies: changing what it returned changes nothing stored', async () => {
    const store = await make();
    const { proxy } = await store.apply(doc('web', { provider: 'local' }, { team: 'crawl' }));
    const kept = structuredClone(proxy);
    proxy.labels.team = 'mutated';
    (await store.get('web'))!.status.phase = 'Ready';
    (await store.list())[0]!.spec.provider = 'mutated';
    (await store.credentials('web'))!.password = 'mutated';
    expect(await store.get('web')).toEqual(kept);
    expect((await store.credentials('web'))?.password).not.toBe('mutated');
  });

  it('where it keeps a change feed: a new reader gets everything, then only what was written or removed since', async () => {
    const store = await make();
    expect(store.changesSince !== undefined).toBe(h.changeFeed);
    if (!store.changesSince) return;
    await store.apply(doc('a'));
    await store.apply(doc('b'));
    const first = await store.changesSince(undefined);
    expect(first.full).toBe(true);
    expect(first.written.map((p) => p.name)).toEqual(['a', 'b']);
    expect(await store.changesSince(first.revision)).toEqual({ revision: first.revision, full: false, written: [], removed: [] });
    // An apply that changes nothing and a status update that leaves the status as it was are no writes.
    await store.apply(doc('a'));
    await store.updateStatus('a', (p) => p.status);
    expect((await store.changesSince(first.revision)).written).toEqual([]);
    await store.updateStatus('b', (p) => ({ ...p.status, phase: 'Ready' }));
    await store.apply(doc('c'));
    await store.remove('a');
    const next = await store.changesSince(first.revision);
    expect(next.full).toBe(false);
    expect(next.written.map((p) => [p.name, p.status.phase]).sort()).toEqual([
      ['b', 'Ready'],
      ['c', 'Pending'],
    ]);
    expect(next.removed).toEqual(['a']);
    expect(next.revision).toBeGreaterThan(first.revision);
    expect(await store.changesSince(next.revision)).toEqual({ revision: next.revision, full: false, written: [], removed: [] });
  });

  it('two stores are separate: one never sees the other’s proxies', async () => {
    const one = await make();
    const two = await make();
    await one.apply(doc('web'));
    expect(await two.get('web')).toBeUndefined();
    expect(await two.list()).toEqual([]);
  });
});

describe('ProxyStore on Kubernetes: the objects as kubectl sees them', () => {
  let fake: FakeKubeApiserver;
  let store: KubernetesProxyStore;
  beforeAll(async () => {
    fake = await startFakeKubeApiserver();
    fake.registerCrd(proxyCrd());
    store = new KubernetesProxyStore(fake.kubeConfig(), 'default');
  });
  afterAll(() => fake.close());

  it('apply: the Secret is owned by the Proxy and named in its status; the Proxy carries the instance finalizer', async () => {
    const { proxy } = await store.apply(doc('owned'));
    const crs = fake.kubeConfig().makeApiClient(CustomObjectsApi);
    const obj = (await crs.getNamespacedCustomObject({
      group: 'egress-proxies.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'proxies',
      name: 'owned',
    })) as {
      metadata: { finalizers?: string[] };
      status: { credentialsSecretRef?: { name: string } };
    };
    expect(obj.metadata.finalizers).toEqual([INSTANCE_FINALIZER]);
    const secretName = obj.status.credentialsSecretRef?.name ?? '';
    const secret = await fake.kubeConfig().makeApiClient(CoreV1Api).readNamespacedSecret({ namespace: 'default', name: secretName });
    expect(secret.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ apiVersion: 'egress-proxies.io/v1alpha1', kind: 'Proxy', name: 'owned', uid: proxy.metadata.uid, controller: true }),
    ]);
  });

  it('listPoolMembers: only the Proxies labelled with a pool, sorted, as the pick member cache polls them', async () => {
    await store.apply(doc('pm-b', { provider: 'local' }, { [POOL_LABEL]: 'p' }));
    await store.apply(doc('pm-loner'));
    await store.apply(doc('pm-a', { provider: 'local' }, { [POOL_LABEL]: 'q' }));
    const members = (await store.listPoolMembers()).map((p) => p.name).filter((n) => n.startsWith('pm-'));
    expect(members).toEqual(['pm-a', 'pm-b']);
    expect((await store.list()).map((p) => p.name)).toContain('pm-loner');
  });

  it('a Proxy written with kubectl (no finalizer, Secret or status) reads as Pending; reconcile’s credentials() adopts it: finalizer, then Secret', async () => {
    const crs = fake.kubeConfig().makeApiClient(CustomObjectsApi);
    await crs.createNamespacedCustomObject({
      group: 'egress-proxies.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'proxies',
      body: { apiVersion: 'egress-proxies.io/v1alpha1', kind: 'Proxy', metadata: { name: 'by-hand' }, spec: { provider: 'local' } },
    });
    expect((await store.get('by-hand'))?.status).toEqual({ phase: 'Pending', conditions: [], observedGeneration: 0 });
    expect(await store.credentialsOf(['by-hand'])).toEqual([undefined]);
    const made = await store.credentials('by-hand');
    expect(made?.username).toBe('egress-by-hand');
    expect(await store.credentials('by-hand')).toEqual(made);
    const obj = fake.getObject('egress-proxies.io', 'v1alpha1', 'proxies', 'default', 'by-hand') as unknown as { metadata: { finalizers?: string[] } };
    expect(obj.metadata.finalizers).toEqual([INSTANCE_FINALIZER]);
  });

  it('--orphan is an annotation on the Proxy', async () => {
    await store.apply(doc('orphan'));
    await store.requestDeletion('orphan', { orphan: true });
    const obj = fake.getObject('egress-proxies.io', 'v1alpha1', 'proxies', 'default', 'orphan') as unknown as {
      metadata: { annotations?: Record<string, string> };
    };
    expect(obj.metadata.annotations?.[ORPHAN_ANNOTATION]).toBe('true');
  });
});
