import { CoreV1Api, makeInformer, type V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';
import { recordWatch, until, type RecordedWatch } from './watch-recorder.ts';

let kube: FakeKubeApiserver;
let api: CoreV1Api;
const stops: (() => unknown)[] = [];

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  api = kube.kubeConfig().makeApiClient(CoreV1Api);
});
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  await kube.close();
});

const watch = (path: string, query: Record<string, string | number | boolean | undefined>): Promise<RecordedWatch> => recordWatch(kube, path, query, stops);

const pod = (name: string, labels: Record<string, string> = { app: 'egress-proxy' }): V1Pod => ({
  metadata: { name, labels },
  spec: { containers: [{ name: 'proxy', image: 'egress/proxy:1.0' }] },
});

describe('fake kube-apiserver watch through client-node', () => {
  it('streams ADDED, MODIFIED and DELETED from a list resourceVersion', async () => {
    await api.createNamespacedPod({ namespace: 'default', body: pod('before') });
    const list = await api.listNamespacedPod({ namespace: 'default' });
    const w = await watch('/api/v1/namespaces/default/pods', { resourceVersion: list.metadata?.resourceVersion });
    const req = kube.requests.at(-1)!;
    expect(req.query).toMatchObject({ watch: 'true', resourceVersion: list.metadata?.resourceVersion });
    expect(req.outcome).toBe('streaming');

    await api.createNamespacedPod({ namespace: 'default', body: pod('p1') });
    kube.setPodStatus('default', 'p1', { phase: 'Running', podIP: '10.0.0.9' });
    kube.store.deletionMode = 'immediate';
    await api.deleteNamespacedPod({ namespace: 'default', name: 'p1' });
    await until(() => w.events.length >= 3, 'three events');
    expect(w.events.map((e) => `${e.type} ${e.name}`)).toEqual(['ADDED p1', 'MODIFIED p1', 'DELETED p1']);
  });

  it('starts with synthetic ADDED events without a resourceVersion, and applies the selector both ways', async () => {
    kube.seedPod({ metadata: { name: 'a', labels: { app: 'egress-proxy' } } });
    kube.seedPod({ metadata: { name: 'b', labels: { app: 'other' } } });
    const w = await watch('/api/v1/pods', { labelSelector: 'app=egress-proxy' });
    await until(() => w.events.length >= 1, 'initial ADDED');
    kube.seedPod({ metadata: { name: 'a', labels: { app: 'moved' } } });
    kube.seedPod({ metadata: { name: 'b', labels: { app: 'egress-proxy' } } });
    await until(() => w.events.length >= 3, 'selector transitions');
    expect(w.events.map((e) => `${e.type} ${e.name}`)).toEqual(['ADDED a', 'DELETED a', 'ADDED b']);
  });

  it('sends an ERROR event with 410 Expired for a resourceVersion older than the event log', async () => {
    kube.store.eventLogSize = 2;
    const first = kube.seedPod({ metadata: { name: 'x' } });
    for (const phase of ['Running', 'Failed', 'Succeeded'] as const) kube.setPodStatus('default', 'x', { phase });
    const w = await watch('/api/v1/pods', { resourceVersion: first.metadata.resourceVersion });
    await until(() => w.events.length === 1 && w.ended(), 'the ERROR event and the end of the stream');
    expect(w.events[0]!.type).toBe('ERROR');
    expect(w.events[0]!.object).toMatchObject({ kind: 'Status', code: 410, reason: 'Expired' });
    expect((w.events[0]!.object as { message: string }).message).toMatch(/^too old resource version: \d+ \(\d+\)$/);
  });

  it('sends BOOKMARK events when allowed', async () => {
    kube.bookmarkIntervalMs = 10;
    const w = await watch('/api/v1/pods', { allowWatchBookmarks: true, resourceVersion: kube.store.resourceVersion() });
    await until(() => w.events.some((e) => e.type === 'BOOKMARK'), 'a bookmark');
    expect(w.events.find((e) => e.type === 'BOOKMARK')!.object).toEqual({
      kind: 'Pod',
      apiVersion: 'v1',
      metadata: { resourceVersion: kube.store.resourceVersion() },
    });
  });

  it('ends the stream after timeoutSeconds, having delivered what happened until then', async () => {
    const w = await watch('/api/v1/pods', { timeoutSeconds: 1, resourceVersion: kube.store.resourceVersion() });
    // Written right after the watch started: a stream that ended at once would never carry it.
    kube.seedPod({ metadata: { name: 'during' } });
    await until(() => w.ended(), 'the end of the stream');
    expect(w.events.map((e) => `${e.type} ${e.name}`)).toEqual(['ADDED during']);
    expect(w.endError()).toBeUndefined();
  });

  it('feeds an unmodified informer (list, then watch from the list resourceVersion)', async () => {
    kube.seedPod({ metadata: { name: 'existing', labels: { app: 'egress-proxy' } } });
    const informer = makeInformer(
      kube.kubeConfig(),
      '/api/v1/namespaces/default/pods',
      () => api.listNamespacedPod({ namespace: 'default', labelSelector: 'app=egress-proxy' }),
      'app=egress-proxy',
    );
    const added: string[] = [];
    const updated: string[] = [];
    informer.on('add', (p) => added.push(p.metadata!.name!));
    informer.on('update', (p) => updated.push(`${p.metadata!.name} ${p.status?.phase}`));
    informer.on('error', () => undefined);
    await informer.start();
    stops.push(() => informer.stop());

    await api.createNamespacedPod({ namespace: 'default', body: pod('fresh') });
    kube.setPodStatus('default', 'fresh', { phase: 'Running' });
    await until(() => updated.length >= 1, 'the informer update');
    expect(added).toEqual(['existing', 'fresh']);
    expect(updated).toEqual(['fresh Running']);
    const watchReq = kube.requests.find((r) => r.query.watch === 'true')!;
    expect(watchReq.query).toMatchObject({ labelSelector: 'app=egress-proxy', resourceVersion: expect.any(String) });
  });

  it('closes while a watch is open', async () => {
    await watch('/api/v1/pods', {});
    await kube.close();
    expect(kube.requests.at(-1)!.outcome).toBe('streaming');
  });
});
