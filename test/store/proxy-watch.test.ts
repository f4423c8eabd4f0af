/**
 * The watch on Proxy objects (`--store kubernetes`), against the fake kube-apiserver with the generated
 * CRD: which changes ask for a reconcile, resuming from the last resourceVersion, relisting on 410 Gone,
 * backing off on errors, and stopping on its signal.
 */
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { proxyCrd } from '../../src/crds/definitions.ts';
import { createLogger } from '../../src/logging.ts';
import { KubernetesProxyStore } from '../../src/store/kubernetes/proxy-store.ts';
import { ProxyWatch } from '../../src/store/kubernetes/proxy-watch.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { waitFor } from '../support/wait.ts';

const PATH = '/apis/egress-proxies.io/v1alpha1/namespaces/default/proxies';
const logger = createLogger({ level: 'silent' });

let fake: FakeKubeApiserver;
let store: KubernetesProxyStore;
let crs: CustomObjectsApi;
let stop: AbortController;
let running: Promise<void>;
let changes: string[];

function startWatch(options: ConstructorParameters<typeof ProxyWatch>[3] = {}): void {
  changes = [];
  stop = new AbortController();
  running = new ProxyWatch(fake.kubeConfig(), 'default', logger, { baseBackoffMs: 20, maxBackoffMs: 200, ...options }).run(
    (name) => changes.push(name),
    stop.signal,
  );
}

const seen = (name: string, times = 1): Promise<true> =>
  waitFor(`${times} change(s) of ${name} (saw ${JSON.stringify(changes)})`, () => changes.filter((c) => c === name).length >= times || undefined, 10_000);

const watches = (): { resourceVersion: string | undefined }[] =>
  fake.requests.filter((r) => r.path === PATH && r.query.watch === 'true').map((r) => ({ resourceVersion: r.query.resourceVersion }));
const lists = (): number => fake.requests.filter((r) => r.path === PATH && r.method === 'GET' && r.query.watch !== 'true').length;

beforeEach(async () => {
  fake = await startFakeKubeApiserver();
  fake.registerCrd(proxyCrd());
  store = new KubernetesProxyStore(fake.kubeConfig(), 'default');
  crs = fake.kubeConfig().makeApiClient(CustomObjectsApi);
});
afterEach(async () => {
  stop.abort();
  await running;
  await fake.close();
});

describe('ProxyWatch', () => {
  it('reports proxies at the first list, then each add, spec change, deletion request and removal; not status or label writes', async () => {
    await store.apply({ metadata: { name: 'before', labels: {} }, spec: { provider: 'local' } });
    startWatch();
    await seen('before');
    await waitFor('the watch', () => watches().length > 0 || undefined);

    await crs.createNamespacedCustomObject({
      group: 'egress-proxies.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'proxies',
      body: { apiVersion: 'egress-proxies.io/v1alpha1', kind: 'Proxy', metadata: { name: 'by-hand' }, spec: { provider: 'local' } },
    });
    await seen('by-hand');
    await store.updateStatus('before', (p) => ({ ...p.status, phase: 'Ready' }));
    await store.apply({ metadata: { name: 'before', labels: { team: 'x' } }, spec: { provider: 'local' } });
    await store.apply({ metadata: { name: 'before', labels: { team: 'x' } }, spec: { provider: 'gce' } });
    await seen('before', 2);
    await store.requestDeletion('before');
    await seen('before', 3);
    await store.remove('before');
    await seen('before', 4);
    // The status write and the label change asked for nothing: four reports of `before` in all.
    await store.apply({ metadata: { name: 'marker', labels: {} }, spec: { provider: 'local' } });
    await seen('marker');
    expect(changes.filter((c) => c === 'before')).toHaveLength(4);
  });

  it('resumes each new watch from the last resourceVersion it saw', async () => {
    startWatch({ timeoutSeconds: 1 });
    await waitFor('the watch', () => watches().length > 0 || undefined);
    await store.apply({ metadata: { name: 'web', labels: {} }, spec: { provider: 'local' } });
    await seen('web');
    const rv = (fake.getObject('egress-proxies.io', 'v1alpha1', 'proxies', 'default', 'web') as { metadata: { resourceVersion: string } } | undefined)?.metadata
      .resourceVersion;
    await waitFor(
      'a watch resumed from the last resourceVersion',
      () =>
        watches()
          .slice(1)
          .some((w) => w.resourceVersion === rv) || undefined,
    );
    expect(lists()).toBe(1);
  });

  it('lists again on 410 Gone and reports what changed meanwhile', async () => {
    await store.apply({ metadata: { name: 'a', labels: {} }, spec: { provider: 'local' } });
    startWatch({ timeoutSeconds: 1 });
    await seen('a');
    await waitFor('the watch', () => watches().length > 0 || undefined);
    // The next watch request waits while the event log moves past its resourceVersion.
    fake.setEventLogSize(1);
    fake.injectFault({ match: { method: 'GET', path: PATH }, latencyMs: 1500 });
    await waitFor('the delayed re-watch', () => fake.requests.filter((r) => r.path === PATH && r.outcome === 'pending').length > 0 || undefined);
    await store.apply({ metadata: { name: 'b', labels: {} }, spec: { provider: 'local' } });
    await store.apply({ metadata: { name: 'c', labels: {} }, spec: { provider: 'local' } });
    await store.apply({ metadata: { name: 'a', labels: {} }, spec: { provider: 'gce' } });
    await seen('b');
    await seen('c');
    await seen('a', 2);
    expect(lists()).toBe(2);
  });

  it('backs off and tries again when the API server fails, and stops when its signal ends', async () => {
    fake.injectFault({ match: { method: 'GET', path: PATH }, status: 500 });
    fake.injectFault({ match: { method: 'GET', path: PATH }, status: 503 });
    await store.apply({ metadata: { name: 'web', labels: {} }, spec: { provider: 'local' } });
    startWatch();
    await seen('web');
    expect(lists()).toBe(3);
    stop.abort();
    await running;
  });
});
