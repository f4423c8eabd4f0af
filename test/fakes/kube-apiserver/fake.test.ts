import { ApiException, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseLabelSelector, matchesLabels, SelectorError, startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';

let kube: FakeKubeApiserver;
let api: CoreV1Api;

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  api = kube.kubeConfig().makeApiClient(CoreV1Api);
});
afterEach(async () => {
  await kube.close();
});

const pod = (name: string, labels: Record<string, string> = {}): V1Pod => ({
  metadata: { name, labels },
  spec: { containers: [{ name: 'proxy', image: 'egress/proxy:1.0' }] },
});

/** Runs a call that must fail and returns its ApiException. */
async function apiError(call: Promise<unknown>): Promise<ApiException<string>> {
  try {
    await call;
  } catch (e) {
    if (e instanceof ApiException) return e as ApiException<string>;
    throw e;
  }
  throw new Error('expected an ApiException');
}

describe('fake kube-apiserver through client-node', () => {
  it('creates, reads and deletes a Pod, with server-set fields and a rising resourceVersion', async () => {
    const created = await api.createNamespacedPod({ namespace: 'default', body: pod('p1', { app: 'x' }) });
    expect(created.metadata).toMatchObject({ name: 'p1', namespace: 'default' });
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.metadata?.creationTimestamp).toBeInstanceOf(Date);
    expect(created.status?.phase).toBe('Pending');
    expect(created.spec?.restartPolicy).toBe('Always');

    const read = await api.readNamespacedPod({ namespace: 'default', name: 'p1' });
    expect(read.metadata?.resourceVersion).toBe(created.metadata?.resourceVersion);

    kube.setPodStatus('default', 'p1', { phase: 'Running', podIP: '10.0.0.7', ready: true });
    const running = await api.readNamespacedPod({ namespace: 'default', name: 'p1' });
    expect(running.status).toMatchObject({ phase: 'Running', podIP: '10.0.0.7' });
    expect(running.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(Number(running.metadata?.resourceVersion)).toBeGreaterThan(Number(created.metadata?.resourceVersion));

    const post = kube.requests.find((r) => r.method === 'POST')!;
    expect(post.contentType).toBe('application/json');
    expect(JSON.parse(post.body)).toMatchObject({ metadata: { name: 'p1' } });
    expect(post.authorization).toBe('Bearer fake-token');
  });

  it('names Pods from generateName and stores nothing for dryRun=All', async () => {
    const generated = await api.createNamespacedPod({ namespace: 'default', body: { metadata: { generateName: 'proxy-' }, spec: pod('x').spec } });
    expect(generated.metadata?.name).toMatch(/^proxy-[a-z0-9]{5}$/);
    const dry = await api.createNamespacedPod({ namespace: 'default', body: pod('dry'), dryRun: 'All' });
    expect(dry.metadata?.name).toBe('dry');
    expect(kube.getPod('default', 'dry')).toBeUndefined();
    expect(kube.listPods('default').map((p) => p.metadata.name)).toEqual([generated.metadata?.name]);
  });

  it('keeps a bound Pod terminating until the test finishes it; an unbound Pod goes at once', async () => {
    await api.createNamespacedPod({ namespace: 'default', body: pod('bound') });
    await api.createNamespacedPod({ namespace: 'default', body: pod('unbound') });
    kube.setPodStatus('default', 'bound', { phase: 'Running' });

    const terminating = await api.deleteNamespacedPod({ namespace: 'default', name: 'bound' });
    expect(terminating.metadata?.deletionTimestamp).toBeInstanceOf(Date);
    expect(kube.getPod('default', 'bound')?.metadata.deletionGracePeriodSeconds).toBe(30);
    await api.deleteNamespacedPod({ namespace: 'default', name: 'unbound' });
    expect(kube.getPod('default', 'unbound')).toBeUndefined();

    kube.finishPodDeletion('default', 'bound');
    const e = await apiError(api.readNamespacedPod({ namespace: 'default', name: 'bound' }));
    expect(e.code).toBe(404);
  });

  it('force-deletes with gracePeriodSeconds=0', async () => {
    await api.createNamespacedPod({ namespace: 'default', body: pod('p') });
    kube.setPodStatus('default', 'p', { phase: 'Running' });
    await api.deleteNamespacedPod({ namespace: 'default', name: 'p', gracePeriodSeconds: 0 });
    expect(kube.getPod('default', 'p')).toBeUndefined();
    expect(kube.requests.at(-1)!.query.gracePeriodSeconds).toBe('0');
  });

  it('answers errors as Status objects that client-node surfaces as ApiException with a string body', async () => {
    await api.createNamespacedPod({ namespace: 'default', body: pod('dup') });
    const conflict = await apiError(api.createNamespacedPod({ namespace: 'default', body: pod('dup') }));
    expect(conflict.code).toBe(409);
    expect(typeof conflict.body).toBe('string');
    expect(JSON.parse(conflict.body)).toMatchObject({
      kind: 'Status',
      reason: 'AlreadyExists',
      message: 'pods "dup" already exists',
      code: 409,
      details: { name: 'dup', kind: 'pods' },
    });

    const missing = await apiError(api.readNamespacedPod({ namespace: 'default', name: 'nope' }));
    expect(JSON.parse(missing.body)).toMatchObject({ reason: 'NotFound', message: 'pods "nope" not found' });

    const noNs = await apiError(api.createNamespacedPod({ namespace: 'ghost', body: pod('x') }));
    expect(JSON.parse(noNs.body)).toMatchObject({ reason: 'NotFound', message: 'namespaces "ghost" not found' });

    const bad = await apiError(api.createNamespacedPod({ namespace: 'default', body: { metadata: { name: 'Bad_Name' }, spec: { containers: [] } } }));
    expect(bad.code).toBe(422);
    expect(JSON.parse(bad.body).reason).toBe('Invalid');

    const rv = await apiError(api.createNamespacedPod({ namespace: 'default', body: { ...pod('rv'), metadata: { name: 'rv', resourceVersion: '5' } } }));
    expect(rv.code).toBe(500);
    expect(JSON.parse(rv.body).reason).toBe('');

    for (const r of kube.requests) expect(r.status).toBeDefined();
  });

  it('authenticates bearer tokens (401) and applies the per-token RBAC knob (403)', async () => {
    const anon = kube.kubeConfig(null).makeApiClient(CoreV1Api);
    expect((await apiError(anon.listPodForAllNamespaces())).code).toBe(401);
    const wrong = kube.kubeConfig('wrong').makeApiClient(CoreV1Api);
    expect((await apiError(wrong.listNamespacedPod({ namespace: 'default' }))).code).toBe(401);

    kube.forbid('fake-token', ['create']);
    await api.listNamespacedPod({ namespace: 'default' });
    const denied = await apiError(api.createNamespacedPod({ namespace: 'default', body: pod('p') }));
    expect(denied.code).toBe(403);
    expect(JSON.parse(denied.body).message).toBe(
      'pods is forbidden: User "system:serviceaccount:egress:operator" cannot create resource "pods" in API group "" in the namespace "default"',
    );
    kube.allow('fake-token');
    await api.createNamespacedPod({ namespace: 'default', body: pod('p') });
  });

  it('pages with limit, opaque continue and remainingItemCount, in namespace/name order', async () => {
    for (const [ns, name] of [
      ['b', 'p2'],
      ['a', 'p9'],
      ['b', 'p1'],
      ['a', 'p3'],
      ['c', 'p0'],
    ] as const) {
      kube.seedPod({ metadata: { name, namespace: ns, labels: { app: 'egress-proxy' } } });
    }
    const seen: string[] = [];
    const first = await api.listPodForAllNamespaces({ limit: 2 });
    expect(first.metadata?.remainingItemCount).toBe(3);
    seen.push(...first.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`));
    let token = first.metadata?._continue;
    while (token) {
      const page = await api.listPodForAllNamespaces({ limit: 2, _continue: token });
      expect(page.metadata?.resourceVersion).toBe(first.metadata?.resourceVersion);
      seen.push(...page.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`));
      token = page.metadata?._continue;
    }
    expect(seen).toEqual(['a/p3', 'a/p9', 'b/p1', 'b/p2', 'c/p0']);

    const filtered = await api.listPodForAllNamespaces({ limit: 1, labelSelector: 'app=egress-proxy' });
    expect(filtered.metadata?._continue).toBeTruthy();
    expect(filtered.metadata?.remainingItemCount).toBeUndefined();

    kube.expireContinueTokens();
    const expired = await apiError(api.listPodForAllNamespaces({ limit: 1, _continue: filtered.metadata!._continue! }));
    expect(expired.code).toBe(410);
    expect(JSON.parse(expired.body).reason).toBe('Expired');
  });

  it('filters by label and field selectors; a bad selector is 400', async () => {
    kube.seedPod({ metadata: { name: 'a', labels: { app: 'egress-proxy', pool: 'eu' } } });
    kube.seedPod({ metadata: { name: 'b', labels: { app: 'egress-proxy', pool: 'us' } } });
    kube.seedPod({ metadata: { name: 'c', labels: { app: 'other' } } });
    kube.setPodStatus('default', 'b', { phase: 'Running' });
    const names = async (q: { labelSelector?: string; fieldSelector?: string }) =>
      (await api.listNamespacedPod({ namespace: 'default', ...q })).items.map((p) => p.metadata?.name);

    expect(await names({ labelSelector: 'pool in (eu, asia)' })).toEqual(['a']);
    expect(await names({ labelSelector: 'app==egress-proxy,pool!=eu' })).toEqual(['b']);
    expect(await names({ labelSelector: '!pool' })).toEqual(['c']);
    expect(await names({ labelSelector: 'pool notin (us)' })).toEqual(['a', 'c']);
    expect(await names({ fieldSelector: 'status.phase=Running' })).toEqual(['b']);
    expect(await names({ fieldSelector: 'metadata.name!=a', labelSelector: 'app' })).toEqual(['b', 'c']);
    expect(kube.requests.at(-1)!.rawQuery).toContain('fieldSelector=metadata.name%21%3Da');
    expect(kube.requests.some((r) => r.rawQuery.includes('labelSelector=pool+in+%28eu%2C+asia%29'))).toBe(true);

    expect((await apiError(names({ labelSelector: 'pool in eu' }))).code).toBe(400);
    expect((await apiError(names({ fieldSelector: 'spec.image=x' }))).code).toBe(400);
  });

  it('injects one-shot faults: a status, then normal service', async () => {
    kube.injectFault({ status: 503, match: { method: 'GET', path: '/api/v1/namespaces/default/pods' } });
    const e = await apiError(api.listNamespacedPod({ namespace: 'default' }));
    expect(e.code).toBe(503);
    expect(JSON.parse(e.body)).toMatchObject({ kind: 'Status', reason: 'ServiceUnavailable' });
    await api.listNamespacedPod({ namespace: 'default' });
    expect(kube.requests.map((r) => r.status)).toEqual([503, 200]);
  });

  it('destroys the socket mid-body', async () => {
    kube.injectFault({ destroySocket: 'mid-body' });
    await expect(api.listNamespacedPod({ namespace: 'default' })).rejects.toThrow();
    expect(kube.requests[0]!.outcome).toBe('destroyed');
  });

  it('sends application/json on every response, errors included', async () => {
    const res = await fetch(`${kube.url}/api/v1/nothing`, { headers: { Authorization: 'Bearer fake-token' } });
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toMatchObject({ kind: 'Status', message: 'the server could not find the requested resource' });
    const unauth = await fetch(`${kube.url}/api/v1/pods`);
    expect(unauth.headers.get('content-type')).toBe('application/json');
  });
});

describe('label selector grammar', () => {
  const sel = (s: string, labels: Record<string, string>) => matchesLabels(parseLabelSelector(s), labels);

  it('matches every operator', () => {
    expect(sel('', {})).toBe(true);
    expect(sel('a=1', { a: '1' })).toBe(true);
    expect(sel('a!=1', {})).toBe(true);
    expect(sel('a in (1,2)', { a: '2' })).toBe(true);
    expect(sel('a notin (1,2)', { a: '3' })).toBe(true);
    expect(sel('a', { a: '' })).toBe(true);
    expect(sel('!a', { a: '' })).toBe(false);
    expect(sel('a>5', { a: '6' })).toBe(true);
    expect(sel('a<5', { a: '6' })).toBe(false);
    expect(sel('example.com/tier=web, a', { 'example.com/tier': 'web', a: 'x' })).toBe(true);
  });

  it('rejects malformed selectors', () => {
    for (const bad of ['a=b c', 'a in (x', 'a in x', '=b', 'a,', 'a>b', 'a=b=c', 'bad key=1', '-a=1', `a=${'x'.repeat(64)}`]) {
      expect(() => parseLabelSelector(bad), bad).toThrow(SelectorError);
    }
  });
});
