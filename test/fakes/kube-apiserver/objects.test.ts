import { ApiException, AuthorizationV1Api, CoreV1Api, type V1Secret, type V1Service } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { base64ErrorOffset, podEnv, startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';

let kube: FakeKubeApiserver;
let api: CoreV1Api;

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  api = kube.kubeConfig().makeApiClient(CoreV1Api);
});
afterEach(async () => {
  await kube.close();
});

async function apiError(
  call: Promise<unknown>,
): Promise<{ code: number; status: { reason: string; message: string; details?: Record<string, unknown>; kind: string } }> {
  try {
    await call;
  } catch (e) {
    if (e instanceof ApiException) return { code: e.code, status: JSON.parse(e.body as string) as never };
    throw e;
  }
  throw new Error('expected an ApiException');
}

const secret = (name: string, data: Record<string, string> = {}, labels: Record<string, string> = {}): V1Secret => ({ metadata: { name, labels }, data });
const b64 = (s: string): string => Buffer.from(s).toString('base64');

describe('fake kube-apiserver: Secrets through client-node', () => {
  it('creates (type defaults to Opaque, stringData merged into data and not stored), reads, replaces and deletes', async () => {
    const created = await api.createNamespacedSecret({
      namespace: 'default',
      body: { metadata: { name: 's1' }, data: { a: b64('x'), b: b64('old') }, stringData: { b: 'new', c: 'plain' } },
    });
    expect(created.type).toBe('Opaque');
    expect(created.data).toEqual({ a: b64('x'), b: b64('new'), c: b64('plain') });
    expect(created.stringData).toBeUndefined();
    expect(created.metadata).toMatchObject({ name: 's1', namespace: 'default', resourceVersion: expect.any(String), uid: expect.any(String) });
    expect(kube.requests[0]).toMatchObject({ method: 'POST', path: '/api/v1/namespaces/default/secrets', status: 201 });

    const read = await api.readNamespacedSecret({ name: 's1', namespace: 'default' });
    const replaced = await api.replaceNamespacedSecret({ name: 's1', namespace: 'default', body: { ...read, data: { a: b64('y') } } });
    expect(replaced.data).toEqual({ a: b64('y') });
    expect(Number(replaced.metadata?.resourceVersion)).toBeGreaterThan(Number(read.metadata?.resourceVersion));
    // A replace that changes nothing keeps the resourceVersion.
    const same = await api.replaceNamespacedSecret({ name: 's1', namespace: 'default', body: replaced });
    expect(same.metadata?.resourceVersion).toBe(replaced.metadata?.resourceVersion);

    // A Secret's delete answers a Status (Pods and Services answer the object).
    const deleted = await api.deleteNamespacedSecret({ name: 's1', namespace: 'default' });
    expect(deleted).toMatchObject({ kind: 'Status', status: 'Success', details: { name: 's1', kind: 'secrets', uid: created.metadata?.uid } });
    expect(kube.getSecret('default', 's1')).toBeUndefined();
  });

  it('answers the errors client code depends on, as Status objects', async () => {
    await api.createNamespacedSecret({ namespace: 'default', body: secret('s1') });
    const dup = await apiError(api.createNamespacedSecret({ namespace: 'default', body: secret('s1') }));
    expect(dup).toMatchObject({
      code: 409,
      status: { kind: 'Status', reason: 'AlreadyExists', message: 'secrets "s1" already exists', details: { name: 's1', kind: 'secrets' } },
    });

    const missing = await apiError(api.readNamespacedSecret({ name: 'nope', namespace: 'default' }));
    expect(missing).toMatchObject({ code: 404, status: { reason: 'NotFound', message: 'secrets "nope" not found' } });
    expect((await apiError(api.deleteNamespacedSecret({ name: 'nope', namespace: 'default' }))).code).toBe(404);
    expect((await apiError(api.createNamespacedSecret({ namespace: 'ghost', body: secret('s') }))).status.message).toBe('namespaces "ghost" not found');

    const stale = await api.readNamespacedSecret({ name: 's1', namespace: 'default' });
    await api.replaceNamespacedSecret({ name: 's1', namespace: 'default', body: { ...stale, data: { k: b64('1') } } });
    const conflict = await apiError(api.replaceNamespacedSecret({ name: 's1', namespace: 'default', body: { ...stale, data: { k: b64('2') } } }));
    expect(conflict).toMatchObject({
      code: 409,
      status: {
        reason: 'Conflict',
        message: 'Operation cannot be fulfilled on secrets "s1": the object has been modified; please apply your changes to the latest version and try again',
      },
    });
    // Without a resourceVersion the update is unconditional (Secrets allow it).
    const { resourceVersion: _rv, ...meta } = stale.metadata ?? {};
    expect((await api.replaceNamespacedSecret({ name: 's1', namespace: 'default', body: { ...stale, metadata: meta, data: { k: b64('3') } } })).data).toEqual({
      k: b64('3'),
    });
  });

  it('validates data: bad base64 is 400 (decoding), a bad key or name is 422 Invalid; type and immutable data cannot change', async () => {
    const bad = await apiError(api.createNamespacedSecret({ namespace: 'default', body: secret('s', { password: 'billy' }) }));
    expect(bad).toMatchObject({
      code: 400,
      status: { reason: 'BadRequest', message: 'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 4' },
    });
    expect((await apiError(api.createNamespacedSecret({ namespace: 'default', body: secret('s', { p: 'a$==' }) }))).status.message).toContain(
      'illegal base64 data at input byte 1',
    );

    const key = await apiError(api.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 's' }, stringData: { 'bad key': 'v' } } }));
    expect(key).toMatchObject({ code: 422, status: { reason: 'Invalid', details: { kind: 'secrets', causes: [{ field: 'data[bad key]' }] } } });
    expect((await apiError(api.createNamespacedSecret({ namespace: 'default', body: secret('Bad_Name') }))).code).toBe(422);
    expect(kube.listSecrets()).toEqual([]);

    const frozen = await api.createNamespacedSecret({ namespace: 'default', body: { ...secret('f', { k: b64('v') }), immutable: true } });
    const change = await apiError(api.replaceNamespacedSecret({ name: 'f', namespace: 'default', body: { ...frozen, data: { k: b64('w') } } }));
    expect(change).toMatchObject({ code: 422, status: { message: 'Secret "f" is invalid: data: Forbidden: field is immutable when `immutable` is set' } });
    const retype = await apiError(api.replaceNamespacedSecret({ name: 'f', namespace: 'default', body: { ...frozen, type: 'kubernetes.io/tls' } }));
    expect(retype.status.message).toContain('type: Invalid value: "kubernetes.io/tls": field is immutable');
  });

  it('checks base64 as Go does', () => {
    expect(base64ErrorOffset('')).toBe(-1);
    expect(base64ErrorOffset(b64('any bytes at all'))).toBe(-1);
    expect(base64ErrorOffset('YQ==')).toBe(-1);
    expect(base64ErrorOffset('YQ=')).toBe(2);
    expect(base64ErrorOffset('bil')).toBe(0);
    expect(base64ErrorOffset('YQ==YQ==')).toBe(2);
    expect(base64ErrorOffset('YW\nJj')).toBe(-1);
  });

  it('lists by label selector, cluster-wide and per namespace, with limit and continue', async () => {
    for (const [ns, name, app] of [
      ['b', 's2', 'x'],
      ['a', 's9', 'x'],
      ['b', 's1', 'y'],
      ['a', 's3', 'x'],
    ] as const) {
      kube.seedSecret({ metadata: { name, namespace: ns, labels: { app } } });
    }
    const names: string[] = [];
    let token: string | undefined;
    do {
      const page = await api.listSecretForAllNamespaces({ labelSelector: 'app=x', limit: 1, ...(token ? { _continue: token } : {}) });
      names.push(...page.items.map((s) => `${s.metadata?.namespace}/${s.metadata?.name}`));
      expect(page.metadata?.remainingItemCount).toBeUndefined();
      token = page.metadata?._continue;
    } while (token);
    expect(names).toEqual(['a/s3', 'a/s9', 'b/s2']);
    expect((await api.listNamespacedSecret({ namespace: 'b' })).items.map((s) => s.metadata?.name)).toEqual(['s1', 's2']);
    expect(kube.requests.at(-1)?.responseBody).toContain('"kind":"SecretList"');
    expect((await apiError(api.listSecretForAllNamespaces({ labelSelector: 'app in x' }))).code).toBe(400);
    kube.expireContinueTokens();
    expect(
      (
        await apiError(
          api.listSecretForAllNamespaces({
            limit: 1,
            _continue: names.length ? Buffer.from(JSON.stringify({ e: 1, rv: '1', k: 'a/s3' })).toString('base64url') : '',
          }),
        )
      ).code,
    ).toBe(410);
  });
});

describe('fake kube-apiserver: Services through client-node', () => {
  const svc = (name: string, type?: string, nodePort?: number): V1Service => ({
    metadata: { name, labels: { app: 'p' } },
    spec: { ...(type ? { type } : {}), selector: { app: 'p' }, ports: [{ port: 3128, ...(nodePort ? { nodePort } : {}) }] },
  });

  it('allocates a cluster IP, and unique node ports in 30000-32767 for NodePort and LoadBalancer', async () => {
    const a = await api.createNamespacedService({ namespace: 'default', body: svc('a') });
    expect(a.spec).toMatchObject({
      type: 'ClusterIP',
      clusterIP: expect.stringMatching(/^10\.\d+\.\d+\.\d+$/),
      ports: [{ port: 3128, protocol: 'TCP', targetPort: 3128 }],
    });
    expect(a.spec?.clusterIPs).toEqual([a.spec?.clusterIP]);
    expect(a.spec?.ports?.[0]?.nodePort).toBeUndefined();
    expect(a.status).toEqual({ loadBalancer: {} });
    const b = await api.createNamespacedService({ namespace: 'default', body: svc('b', 'NodePort') });
    const c = await api.createNamespacedService({ namespace: 'default', body: svc('c', 'LoadBalancer') });
    const ports = [b, c].map((s) => s.spec?.ports?.[0]?.nodePort ?? 0);
    expect(new Set(ports).size).toBe(2);
    for (const p of ports) expect(p >= 30000 && p <= 32767).toBe(true);
    expect(new Set([a, b, c].map((s) => s.spec?.clusterIP)).size).toBe(3);

    const taken = await apiError(api.createNamespacedService({ namespace: 'default', body: svc('d', 'NodePort', ports[0]) }));
    expect(taken).toMatchObject({
      code: 422,
      status: { reason: 'Invalid', message: `Service "d" is invalid: spec.ports[0].nodePort: Invalid value: ${ports[0]}: provided port is already allocated` },
    });
    expect((await apiError(api.createNamespacedService({ namespace: 'default', body: svc('d', 'NodePort', 80) }))).status.message).toContain(
      'provided port is not in the valid range',
    );
    // Deleting releases the port.
    await api.deleteNamespacedService({ name: 'b', namespace: 'default' });
    expect((await api.createNamespacedService({ namespace: 'default', body: svc('d', 'NodePort', ports[0]) })).spec?.ports?.[0]?.nodePort).toBe(ports[0]);
  });

  it('answers 409, 404 and 422 with Status bodies, lists by selector, and lets the test play the cloud controller', async () => {
    await api.createNamespacedService({ namespace: 'default', body: svc('lb', 'LoadBalancer') });
    expect(await apiError(api.createNamespacedService({ namespace: 'default', body: svc('lb') }))).toMatchObject({
      code: 409,
      status: { reason: 'AlreadyExists', message: 'services "lb" already exists' },
    });
    expect(await apiError(api.readNamespacedService({ name: 'x', namespace: 'default' }))).toMatchObject({
      code: 404,
      status: { message: 'services "x" not found' },
    });
    expect(
      (await apiError(api.createNamespacedService({ namespace: 'default', body: { metadata: { name: '1abc' }, spec: { ports: [{ port: 1 }] } } }))).status
        .message,
    ).toContain('a DNS-1035 label');
    expect((await apiError(api.createNamespacedService({ namespace: 'default', body: { metadata: { name: 'noports' }, spec: {} } }))).status.message).toBe(
      'Service "noports" is invalid: spec.ports: Required value',
    );
    expect((await apiError(api.createNamespacedService({ namespace: 'default', body: svc('cip', 'ClusterIP', 30001) }))).status.message).toContain(
      "may not be used when `type` is 'ClusterIP'",
    );

    kube.seedService({ metadata: { name: 'other', namespace: 'default', labels: { app: 'q' } }, spec: { ports: [{ port: 80 }] } });
    expect((await api.listServiceForAllNamespaces({ labelSelector: 'app=p' })).items.map((s) => s.metadata?.name)).toEqual(['lb']);

    kube.setServiceLoadBalancer('default', 'lb', [{ ip: '203.0.113.9' }]);
    const read = await api.readNamespacedService({ name: 'lb', namespace: 'default' });
    expect(read.status?.loadBalancer?.ingress?.[0]?.ip).toBe('203.0.113.9');
    // status is a subresource: a PUT of the Service keeps it.
    const put = await api.replaceNamespacedService({ name: 'lb', namespace: 'default', body: { ...read, status: { loadBalancer: {} } } });
    expect(put.status?.loadBalancer?.ingress?.[0]?.ip).toBe('203.0.113.9');
  });
});

describe('fake kube-apiserver: RBAC per resource, SelfSubjectAccessReview, ResourceQuota admission', () => {
  const review = (resource: string, verb = 'create') =>
    kube
      .kubeConfig()
      .makeApiClient(AuthorizationV1Api)
      .createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: { namespace: 'default', verb, resource } } } });

  it('forbids per verb and resource, and the review answers from the same rules', async () => {
    kube.forbid(kube.token, ['create'], ['secrets']);
    const denied = await apiError(api.createNamespacedSecret({ namespace: 'default', body: secret('s') }));
    expect(denied).toMatchObject({
      code: 403,
      status: {
        reason: 'Forbidden',
        message:
          'secrets is forbidden: User "system:serviceaccount:egress:operator" cannot create resource "secrets" in API group "" in the namespace "default"',
        details: { kind: 'secrets' },
      },
    });
    await api.createNamespacedService({ namespace: 'default', body: { metadata: { name: 'ok' }, spec: { ports: [{ port: 1 }] } } });
    expect((await review('secrets')).status).toEqual({ allowed: false });
    expect((await review('pods')).status).toMatchObject({ allowed: true, reason: expect.stringContaining('RBAC: allowed by') });
    expect((await review('secrets', 'get')).status?.allowed).toBe(true);
    expect(kube.requests.at(-1)).toMatchObject({ method: 'POST', path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', status: 201 });

    kube.forbid(kube.token, ['create'], ['selfsubjectaccessreviews']);
    const noReview = await apiError(review('pods'));
    expect(noReview.code).toBe(403);
    expect(noReview.status.message).toContain('cannot create resource "selfsubjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope');
    kube.allow(kube.token);
    expect((await review('secrets')).status?.allowed).toBe(true);
  });

  it('refuses a create over the quota with 403 Forbidden "exceeded quota", after authorization', async () => {
    kube.setQuota('default', { pods: 1, secrets: 0 }, 'compute-resources');
    const pod = (name: string) => ({ metadata: { name }, spec: { containers: [{ name: 'c', image: 'i:1' }] } });
    await api.createNamespacedPod({ namespace: 'default', body: pod('p1') });
    const over = await apiError(api.createNamespacedPod({ namespace: 'default', body: pod('p2') }));
    expect(over).toMatchObject({
      code: 403,
      status: {
        reason: 'Forbidden',
        message: 'pods "p2" is forbidden: exceeded quota: compute-resources, requested: pods=1, used: pods=1, limited: pods=1',
        details: { name: 'p2', kind: 'pods' },
      },
    });
    expect((await apiError(api.createNamespacedSecret({ namespace: 'default', body: secret('s') }))).status.message).toContain(
      'secrets "s" is forbidden: exceeded quota',
    );
    // A finished Pod no longer counts.
    kube.setPodStatus('default', 'p1', { phase: 'Succeeded' });
    await api.createNamespacedPod({ namespace: 'default', body: pod('p2') });
    // RBAC comes first.
    kube.forbid(kube.token, ['create'], ['pods']);
    expect((await apiError(api.createNamespacedPod({ namespace: 'default', body: pod('p3') }))).status.message).toContain('cannot create resource "pods"');
    kube.setQuota('default', undefined);
  });

  it('resolves a Pod env from its Secret as the kubelet would (test helper)', () => {
    kube.seedSecret({ metadata: { name: 'creds', namespace: 'default' }, stringData: { U: 'user' } });
    const p = kube.seedPod({
      metadata: { name: 'p', namespace: 'default' },
      spec: {
        containers: [
          {
            name: 'c',
            image: 'i',
            env: [
              { name: 'A', value: '1' },
              { name: 'U', valueFrom: { secretKeyRef: { name: 'creds', key: 'U' } } },
            ],
          },
        ],
      },
    });
    expect(podEnv(kube, p)).toEqual({ A: '1', U: 'user' });
    kube.secrets.delete('default', 'creds');
    expect(() => podEnv(kube, p)).toThrow('secret "creds" not found');
  });
});
