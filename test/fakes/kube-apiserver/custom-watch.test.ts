import { CustomObjectsApi, makeInformer, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';
import { recordWatch, until, type RecordedWatch } from './watch-recorder.ts';
import { gadgetCrd, GROUP, widgetCrd } from './test-crds.ts';

let kube: FakeKubeApiserver;
let crs: CustomObjectsApi;
const stops: (() => unknown)[] = [];
const W = { group: GROUP, version: 'v1', plural: 'widgets', namespace: 'default' };
const PATH = `/apis/${GROUP}/v1/namespaces/default/widgets`;
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  kube.registerCrd(widgetCrd());
  kube.registerCrd(gadgetCrd());
  crs = kube.kubeConfig().makeApiClient(CustomObjectsApi);
});
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  await kube.close();
});

const watch = (path: string, query: Record<string, string | number | boolean | undefined>): Promise<RecordedWatch> => recordWatch(kube, path, query, stops);

const widget = (name: string, labels: Record<string, string> = {}, finalizers?: string[]): Record<string, unknown> => ({
  apiVersion: `${GROUP}/v1`,
  kind: 'Widget',
  metadata: { name, labels, ...(finalizers ? { finalizers } : {}) },
  spec: { color: 'red' },
});

describe('fake kube-apiserver: watch on custom resources', () => {
  it('streams synthetic ADDED, then MODIFIED (status), finalizer MODIFIED and DELETED', async () => {
    await crs.createNamespacedCustomObject({ ...W, body: widget('w1', {}, ['example.com/x']) });
    const w = await watch(PATH, {});
    await until(() => w.events.length === 1, 'the synthetic ADDED');
    expect(w.events[0]).toMatchObject({ type: 'ADDED', name: 'w1', object: { apiVersion: `${GROUP}/v1`, kind: 'Widget' } });
    await crs.patchNamespacedCustomObjectStatus({ ...W, name: 'w1', body: { status: { observedGeneration: 1 } } }, merge);
    await crs.deleteNamespacedCustomObject({ ...W, name: 'w1' });
    kube.updateObject(GROUP, 'v1', 'widgets', 'default', 'w1', (o) => delete o.metadata.finalizers);
    await until(() => w.events.length === 4, 'four events');
    expect(w.events.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'MODIFIED', 'DELETED']);
    expect(w.events[2]!.object.metadata.deletionTimestamp).toBeDefined();
  });

  it('replays from a resourceVersion, answers 410 Expired once the log has moved on, and sends bookmarks', async () => {
    const first = await crs.createNamespacedCustomObject({ ...W, body: widget('w1') });
    await crs.createNamespacedCustomObject({ ...W, body: widget('w2') });
    const replay = await watch(PATH, { resourceVersion: first.metadata.resourceVersion });
    await until(() => replay.events.length === 1, 'the replayed ADDED');
    expect(replay.events[0]!.name).toBe('w2');

    kube.setEventLogSize(1);
    await crs.createNamespacedCustomObject({ ...W, body: widget('w3') });
    await crs.createNamespacedCustomObject({ ...W, body: widget('w4') });
    const expired = await watch(PATH, { resourceVersion: first.metadata.resourceVersion });
    await until(expired.ended, 'the end of the expired watch');
    expect(expired.events).toEqual([{ type: 'ERROR', name: undefined, object: expect.objectContaining({ kind: 'Status', code: 410, reason: 'Expired' }) }]);

    kube.bookmarkIntervalMs = 20;
    const bm = await watch(PATH, { allowWatchBookmarks: true, resourceVersion: (await crs.listNamespacedCustomObject(W)).metadata.resourceVersion });
    await until(() => bm.events.some((e) => e.type === 'BOOKMARK'), 'a bookmark');
    expect(bm.events.find((e) => e.type === 'BOOKMARK')!.object).toEqual({
      kind: 'Widget',
      apiVersion: `${GROUP}/v1`,
      metadata: { resourceVersion: expect.any(String) },
    });
  });

  it('sends a label selector exit as DELETED and ends after timeoutSeconds', async () => {
    await crs.createNamespacedCustomObject({ ...W, body: widget('w1', { pool: 'a' }) });
    const w = await watch(PATH, { labelSelector: 'pool=a', timeoutSeconds: 1 });
    await until(() => w.events.length === 1, 'the ADDED');
    await crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: { metadata: { labels: { pool: 'b' } } } }, merge);
    await until(() => w.events.length === 2, 'the exit');
    expect(w.events[1]).toMatchObject({ type: 'DELETED', name: 'w1' });
    await until(w.ended, 'the timeout');
  });

  it('feeds an unmodified client-node informer on a cluster-scoped kind', async () => {
    const path = `/apis/${GROUP}/v1/gadgets`;
    const G = { group: GROUP, version: 'v1', plural: 'gadgets' };
    await crs.createClusterCustomObject({ ...G, body: { apiVersion: `${GROUP}/v1`, kind: 'Gadget', metadata: { name: 'g1' } } });
    const informer = makeInformer(kube.kubeConfig(), path, () => crs.listClusterCustomObject(G));
    const added: string[] = [];
    const deleted: string[] = [];
    informer.on('add', (o) => added.push(o.metadata!.name!));
    informer.on('delete', (o) => deleted.push(o.metadata!.name!));
    await informer.start();
    stops.push(() => informer.stop());
    await crs.createClusterCustomObject({ ...G, body: { apiVersion: `${GROUP}/v1`, kind: 'Gadget', metadata: { name: 'g2' } } });
    await crs.deleteClusterCustomObject({ ...G, name: 'g1' });
    await until(() => added.length === 2 && deleted.length === 1, 'the informer events');
    expect(added).toEqual(['g1', 'g2']);
    expect(deleted).toEqual(['g1']);
    const watchReq = kube.requests.find((r) => r.path === path && r.query.watch === 'true');
    expect(watchReq?.query.resourceVersion).toBeDefined();
  });
});
