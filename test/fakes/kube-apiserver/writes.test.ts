import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';

let kube: FakeKubeApiserver;
let api: CoreV1Api;
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  api = kube.kubeConfig().makeApiClient(CoreV1Api);
  await api.createNamespacedPod({
    namespace: 'default',
    body: { metadata: { name: 'p', labels: { app: 'egress-proxy' } }, spec: { containers: [{ name: 'proxy', image: 'egress/proxy:1.0' }] } },
  });
});
afterEach(async () => {
  await kube.close();
});

async function apiError(call: Promise<unknown>): Promise<{ code: number; reason: string; message: string }> {
  try {
    await call;
  } catch (e) {
    if (e instanceof ApiException) {
      const body = JSON.parse(e.body as string) as { reason: string; message: string };
      return { code: e.code, reason: body.reason, message: body.message };
    }
    throw e;
  }
  throw new Error('expected an ApiException');
}

describe('fake kube-apiserver writes through client-node', () => {
  it('merge-patches labels, bumping the resourceVersion; a no-op patch keeps it', async () => {
    const before = kube.getPod('default', 'p')!;
    const patched = await api.patchNamespacedPod({ namespace: 'default', name: 'p', body: { metadata: { labels: { pool: 'eu', app: null } } } }, merge);
    expect(patched.metadata?.labels).toEqual({ pool: 'eu' });
    expect(Number(patched.metadata?.resourceVersion)).toBeGreaterThan(Number(before.metadata.resourceVersion));
    expect(kube.requests.at(-1)!.contentType).toBe('application/merge-patch+json');

    const again = await api.patchNamespacedPod({ namespace: 'default', name: 'p', body: { metadata: { labels: { pool: 'eu' } } } }, merge);
    expect(again.metadata?.resourceVersion).toBe(patched.metadata?.resourceVersion);
  });

  it('answers 400 to an object sent as JSON Patch (client-node’s default) and applies a real JSON Patch', async () => {
    const wrong = await apiError(api.patchNamespacedPod({ namespace: 'default', name: 'p', body: { metadata: { labels: { x: 'y' } } } }));
    expect(kube.requests.at(-1)!.contentType).toBe('application/json-patch+json');
    expect(wrong).toMatchObject({ code: 400, reason: 'BadRequest', message: 'json: cannot unmarshal object into Go value of type jsonpatch.Patch' });

    const ok = await api.patchNamespacedPod({ namespace: 'default', name: 'p', body: [{ op: 'add', path: '/metadata/labels/pool', value: 'us' }] });
    expect(ok.metadata?.labels).toEqual({ app: 'egress-proxy', pool: 'us' });

    const failedTest = await apiError(
      api.patchNamespacedPod({ namespace: 'default', name: 'p', body: [{ op: 'test', path: '/metadata/labels/pool', value: 'eu' }] }),
    );
    expect(failedTest.code).toBe(422);
  });

  it('answers 415 to an unsupported patch type and 400 to apply without fieldManager', async () => {
    const csv = await apiError(api.patchNamespacedPod({ namespace: 'default', name: 'p', body: {} }, setHeaderOptions('Content-Type', 'text/csv')));
    expect(csv).toMatchObject({ code: 415, reason: 'UnsupportedMediaType' });
    const apply = await apiError(
      api.patchNamespacedPod(
        { namespace: 'default', name: 'p', body: { metadata: { name: 'p' } } },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      ),
    );
    expect(apply.code).toBe(400);
    const applied = await api.patchNamespacedPod(
      { namespace: 'default', name: 'p', fieldManager: 'egress', body: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', annotations: { a: 'b' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    expect(applied.metadata?.annotations).toEqual({ a: 'b' });
  });

  it('replaces with optimistic concurrency: 422 without a resourceVersion, 409 when stale', async () => {
    const current = await api.readNamespacedPod({ namespace: 'default', name: 'p' });
    const stale = structuredClone<V1Pod>(current);
    current.metadata!.labels = { app: 'egress-proxy', v: '2' };
    const replaced = await api.replaceNamespacedPod({ namespace: 'default', name: 'p', body: current });
    expect(replaced.metadata?.labels?.v).toBe('2');

    stale.metadata!.labels = { v: 'lost' };
    const conflict = await apiError(api.replaceNamespacedPod({ namespace: 'default', name: 'p', body: stale }));
    expect(conflict).toMatchObject({
      code: 409,
      reason: 'Conflict',
      message: 'Operation cannot be fulfilled on pods "p": the object has been modified; please apply your changes to the latest version and try again',
    });
    const noRv = await apiError(
      api.replaceNamespacedPod({ namespace: 'default', name: 'p', body: { ...replaced, metadata: { ...replaced.metadata, resourceVersion: undefined } } }),
    );
    expect(noRv).toMatchObject({ code: 422, reason: 'Invalid' });
  });

  it('changes only status through /status, and ignores status on the main resource', async () => {
    await api.patchNamespacedPod({ namespace: 'default', name: 'p', body: { status: { phase: 'Running' } } }, merge);
    expect(kube.getPod('default', 'p')!.status.phase).toBe('Pending');
    const s = await api.patchNamespacedPodStatus(
      { namespace: 'default', name: 'p', body: { status: { phase: 'Failed' }, metadata: { labels: { ignored: 'yes' } } } },
      merge,
    );
    expect(s.status?.phase).toBe('Failed');
    expect(s.metadata?.labels).toEqual({ app: 'egress-proxy' });
  });

  it('forbids spec changes other than container images', async () => {
    const changedImage = await api.patchNamespacedPod({
      namespace: 'default',
      name: 'p',
      body: [{ op: 'replace', path: '/spec/containers/0/image', value: 'egress/proxy:1.1' }],
    });
    expect(changedImage.spec?.containers[0]?.image).toBe('egress/proxy:1.1');
    const renamed = await apiError(api.patchNamespacedPod({ namespace: 'default', name: 'p', body: { spec: { restartPolicy: 'Never' } } }, merge));
    expect(renamed).toMatchObject({ code: 422, reason: 'Invalid' });
  });

  it('deletes a terminating Pod once its last finalizer is removed', async () => {
    await api.patchNamespacedPod({ namespace: 'default', name: 'p', body: { metadata: { finalizers: ['egress/cleanup'] } } }, merge);
    await api.deleteNamespacedPod({ namespace: 'default', name: 'p' });
    expect(kube.getPod('default', 'p')?.metadata.deletionTimestamp).toBeDefined();
    await api.patchNamespacedPod({ namespace: 'default', name: 'p', body: { metadata: { finalizers: null } } }, merge);
    expect(kube.getPod('default', 'p')).toBeUndefined();
  });
});
