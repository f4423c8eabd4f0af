/**
 * The install's RBAC is enough for what each role's store really does: the fake apiserver gets one
 * token per role's ServiceAccount and refuses (403) every verb on every resource the install's
 * Roles and ClusterRoles do not grant that account; then each role's own store calls run with it.
 * The fake's rules know verbs and resources only (no namespaces, no subresources: a grant on
 * `proxies/status` counts for `proxies`), so namespacing and status-only writes are asserted on the
 * rendered objects in kubernetes-install.test.ts, and here only that no call needs a verb the role lacks.
 */
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { proxyCrd, proxyPoolCrd, providerHealthCrd } from '../../src/crds/definitions.ts';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import { silentLogger } from '../../src/logging.ts';
import { poolDocumentSchema, type PoolDocument } from '../../src/model/pool-resource.ts';
import { KubernetesPoolStore } from '../../src/store/kubernetes/pool-store.ts';
import { KubernetesProxyStore } from '../../src/store/kubernetes/proxy-store.ts';
import { ProxyWatch } from '../../src/store/kubernetes/proxy-watch.ts';
import { KubernetesStatusStore } from '../../src/store/kubernetes/status-store.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { waitFor } from '../support/wait.ts';
import { grantsOf, renderInstall, type KubeObject } from '../support/kube-install.ts';
import { describeWithTool } from '../support/required-tools.ts';

const NS = 'egress-proxies';
const ROLES = ['scheduler', 'worker', 'publisher', 'api'] as const;
type Role = (typeof ROLES)[number];
const VERBS = ['get', 'list', 'create', 'update', 'patch', 'delete', 'watch'] as const;
const RESOURCES = ['providerhealths', 'proxies', 'proxypools', 'secrets', 'pods', 'services'];
const T0 = '2026-12-01T10:00:00.000Z';

let kube: FakeKubeApiserver;

/** Denies the role's token every verb × resource that no rule bound to its ServiceAccount grants. */
function applyRbac(objects: readonly KubeObject[], role: Role): void {
  const grants = grantsOf(objects, NS, `egress-${role}`);
  for (const resource of RESOURCES) {
    for (const verb of VERBS) {
      const granted = grants.some(({ rule }) => rule.verbs.includes(verb) && (rule.resources ?? []).some((r) => r === resource || r === `${resource}/status`));
      if (!granted) kube.forbid(`${role}-token`, [verb], [resource]);
    }
  }
}

function pool(name: string, replicas = 2): PoolDocument {
  return poolDocumentSchema.parse({ kind: 'ProxyPool', metadata: { name }, spec: { replicas, template: { spec: { provider: 'cluster' } } } });
}

/** The requests `role`'s token made that were refused. */
const refusedOf = (role: Role) => kube.requests.filter((r) => r.authorization === `Bearer ${role}-token` && r.status === 403);

function health(name: string): ProviderHealth {
  return {
    name,
    status: {
      ready: true,
      lastTransitionTime: T0,
      lastCheckTime: T0,
      targets: [{ name: 'apiserver', ready: true, reason: 'Ok', message: '', lastTransitionTime: T0, lastCheckTime: T0, durationSeconds: 0.01, details: {} }],
    },
  };
}

beforeEach(async () => {
  kube = await startFakeKubeApiserver({
    tokens: Object.fromEntries([['admin-token', 'admin'], ...ROLES.map((r) => [`${r}-token`, `system:serviceaccount:${NS}:egress-${r}`])]),
  });
  kube.registerCrd(providerHealthCrd());
  kube.registerCrd(proxyCrd());
  kube.registerCrd(proxyPoolCrd());
  await kube
    .kubeConfig('admin-token')
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: NS } } });
  const { objects } = await renderInstall();
  for (const role of ROLES) applyRbac(objects, role);
});
afterEach(async () => {
  await kube.close();
});

describeWithTool('kubectl', 'the install’s RBAC against what each role’s store does', { timeout: 60_000 }, () => {
  it('lets the scheduler create, list and delete ProviderHealth and the publisher write only its status; neither may touch Proxies', async () => {
    const publisher = new KubernetesStatusStore(kube.kubeConfig('publisher-token'));
    // Before the leading scheduler made the object, the publisher may not: a retryable refusal.
    await expect(publisher.updateProviderHealth('cluster', () => health('cluster'))).rejects.toMatchObject({ retryable: true });
    const scheduler = new KubernetesStatusStore(kube.kubeConfig('scheduler-token'));
    await scheduler.ensureProviderHealth(['cluster']);
    expect(await publisher.updateProviderHealth('cluster', () => health('cluster'))).toEqual(health('cluster'));
    await publisher.close();
    expect((await scheduler.listProviderHealth()).map((h) => h.name)).toEqual(['cluster']);
    expect(await scheduler.deleteProviderHealth('cluster')).toBe(true);
    await scheduler.close();
    const asPublisher = new KubernetesProxyStore(kube.kubeConfig('publisher-token'), NS);
    await expect(asPublisher.list()).rejects.toThrow(/forbidden/i);
    // The deletion of a ProviderHealth is the scheduler's: the publisher's delete is refused.
    await new KubernetesStatusStore(kube.kubeConfig('admin-token')).ensureProviderHealth(['other']);
    await new KubernetesStatusStore(kube.kubeConfig('admin-token')).updateProviderHealth('other', () => health('other'));
    await expect(new KubernetesStatusStore(kube.kubeConfig('publisher-token')).deleteProviderHealth('other')).rejects.toThrow(/forbidden/i);
  });

  it('lets the API apply, list, hand out and delete a Proxy, and the worker reconcile its status and remove it', async () => {
    const api = new KubernetesProxyStore(kube.kubeConfig('api-token'), NS);
    const { outcome } = await api.apply({ metadata: { name: 'p1', labels: {} }, spec: { provider: 'cluster' } });
    expect(outcome).toBe('created');
    expect((await api.list()).map((p) => p.name)).toEqual(['p1']);
    expect(await api.credentials('p1')).toBeDefined();
    const worker = new KubernetesProxyStore(kube.kubeConfig('worker-token'), NS);
    const read = await worker.get('p1');
    expect(read?.spec.provider).toBe('cluster');
    expect(await worker.credentials('p1')).toEqual(await api.credentials('p1'));
    const updated = await worker.updateStatus('p1', (p) => ({ ...p.status, phase: 'Provisioning' }));
    expect(updated?.status.phase).toBe('Provisioning');
    // The worker may not create Proxies (only the API and people with `edit` do).
    await expect(worker.apply({ metadata: { name: 'p2', labels: {} }, spec: { provider: 'cluster' } })).rejects.toThrow(/forbidden/i);
    const deleting = await api.requestDeletion('p1');
    expect(deleting.metadata.deletionRequestedAt).toBeDefined();
    await worker.remove('p1');
    expect(await api.get('p1')).toBeUndefined();
  });

  it('lets the worker take over a Proxy applied with kubectl (finalizer, then its credentials Secret)', async () => {
    await kube
      .kubeConfig('admin-token')
      .makeApiClient(CustomObjectsApi)
      .createNamespacedCustomObject({
        group: 'egress-proxies.io',
        version: 'v1alpha1',
        namespace: NS,
        plural: 'proxies',
        body: { apiVersion: 'egress-proxies.io/v1alpha1', kind: 'Proxy', metadata: { name: 'by-kubectl' }, spec: { provider: 'cluster' } },
      });
    const worker = new KubernetesProxyStore(kube.kubeConfig('worker-token'), NS);
    const credentials = await worker.credentials('by-kubectl');
    expect(credentials?.username).toBeTruthy();
    expect(kube.requests.filter((r) => r.authorization === 'Bearer worker-token' && r.status === 403)).toEqual([]);
  });

  it('lets the scheduler watch Proxies (list, then watch) and see an apply', async () => {
    const watch = new ProxyWatch(kube.kubeConfig('scheduler-token'), NS, silentLogger());
    const abort = new AbortController();
    const changed: string[] = [];
    const refused = () => kube.requests.filter((r) => r.authorization === 'Bearer scheduler-token' && r.status === 403);
    const running = watch.run((name) => changed.push(name), abort.signal);
    await new KubernetesProxyStore(kube.kubeConfig('api-token'), NS).apply({ metadata: { name: 'p1', labels: {} }, spec: { provider: 'cluster' } });
    await waitFor('the watch to report p1, or a refusal', () => changed.includes('p1') || refused().length > 0, 30_000);
    abort.abort();
    await running.catch(() => undefined);
    // Every request the watch made was allowed, and it reported the new Proxy.
    expect(refused().map((r) => `${r.method} ${r.path}?${r.rawQuery}`)).toEqual([]);
    expect(changed).toContain('p1');
  });

  it('lets the API apply, list and delete a ProxyPool, and the worker write its status and remove it; neither more', async () => {
    const api = new KubernetesPoolStore(kube.kubeConfig('api-token'), NS);
    expect((await api.apply(pool('crawl'))).outcome).toBe('created');
    expect((await api.apply(pool('crawl', 3))).outcome).toBe('configured');
    expect((await api.list()).map((p) => p.name)).toEqual(['crawl']);
    const worker = new KubernetesPoolStore(kube.kubeConfig('worker-token'), NS);
    expect((await worker.get('crawl'))?.spec.replicas).toBe(3);
    expect((await worker.updateStatus('crawl', (p) => ({ ...p.status, desired: 3 })))?.status.desired).toBe(3);
    expect(refusedOf('worker')).toEqual([]);
    // The worker may neither create nor delete a pool; the publisher may not read pools, nor the scheduler create one.
    await expect(worker.apply(pool('other'))).rejects.toThrow(/forbidden/i);
    await expect(worker.requestDeletion('crawl')).rejects.toThrow(/forbidden/i);
    await expect(new KubernetesPoolStore(kube.kubeConfig('publisher-token'), NS).list()).rejects.toThrow(/forbidden/i);
    await expect(new KubernetesPoolStore(kube.kubeConfig('scheduler-token'), NS).apply(pool('other'))).rejects.toThrow(/forbidden/i);
    expect((await api.requestDeletion('crawl')).metadata.deletionRequestedAt).toBeDefined();
    await worker.remove('crawl');
    expect(await api.get('crawl')).toBeUndefined();
  });

  it('lets the worker take over a ProxyPool applied with kubectl (the members finalizer, on its first status write)', async () => {
    await kube
      .kubeConfig('admin-token')
      .makeApiClient(CustomObjectsApi)
      .createNamespacedCustomObject({
        group: 'egress-proxies.io',
        version: 'v1alpha1',
        namespace: NS,
        plural: 'proxypools',
        body: { apiVersion: 'egress-proxies.io/v1alpha1', kind: 'ProxyPool', metadata: { name: 'by-kubectl' }, spec: pool('by-kubectl').spec },
      });
    const worker = new KubernetesPoolStore(kube.kubeConfig('worker-token'), NS);
    expect((await worker.updateStatus('by-kubectl', (p) => ({ ...p.status, desired: 2 })))?.status.desired).toBe(2);
    const obj = kube.getObject('egress-proxies.io', 'v1alpha1', 'proxypools', NS, 'by-kubectl') as unknown as { metadata: { finalizers?: string[] } };
    expect(obj.metadata.finalizers).toEqual(['egress-proxies.io/members']);
    expect(refusedOf('worker')).toEqual([]);
  });

  it('lets the scheduler watch ProxyPools and the members’ Proxies and see an apply', async () => {
    const watch = new ProxyWatch(kube.kubeConfig('scheduler-token'), NS, silentLogger());
    const abort = new AbortController();
    const pools: string[] = [];
    const running = watch.run(
      () => undefined,
      abort.signal,
      (name) => pools.push(name),
    );
    await new KubernetesPoolStore(kube.kubeConfig('api-token'), NS).apply(pool('crawl'));
    await waitFor('the watch to report crawl, or a refusal', () => pools.includes('crawl') || refusedOf('scheduler').length > 0, 30_000);
    abort.abort();
    await running.catch(() => undefined);
    expect(refusedOf('scheduler').map((r) => `${r.method} ${r.path}?${r.rawQuery}`)).toEqual([]);
    expect(pools).toContain('crawl');
  });
});
