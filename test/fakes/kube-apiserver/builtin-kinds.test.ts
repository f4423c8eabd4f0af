import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  PatchStrategy,
  PolicyV1Api,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Deployment,
} from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';

let kube: FakeKubeApiserver;

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
});
afterEach(async () => {
  await kube.close();
});

async function apiError(call: Promise<unknown>): Promise<{ code: number; status: { reason: string; message: string; details?: Record<string, unknown> } }> {
  try {
    await call;
  } catch (e) {
    if (e instanceof ApiException) return { code: e.code, status: JSON.parse(e.body as string) as never };
    throw e;
  }
  throw new Error('expected an ApiException');
}

const deployment = (name: string, replicas = 1): V1Deployment => ({
  metadata: { name },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'egress:1' }] } },
  },
});

describe('fake kube-apiserver: the install’s built-in kinds through client-node', () => {
  it('creates and deletes a Namespace; objects need their namespace and go with it', async () => {
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    const ns = await core.createNamespace({ body: { metadata: { name: 'egress' } } });
    expect(ns).toMatchObject({ metadata: { name: 'egress', labels: { 'kubernetes.io/metadata.name': 'egress' } }, status: { phase: 'Active' } });
    expect((await core.listNamespace()).items.map((n) => n.metadata?.name)).toEqual(['default', 'egress', 'kube-public', 'kube-system']);
    await core.createNamespacedServiceAccount({ namespace: 'egress', body: { metadata: { name: 'api' } } });
    await core.createNamespacedConfigMap({ namespace: 'egress', body: { metadata: { name: 'cfg' }, data: { a: 'b' } } });
    const missing = await apiError(core.createNamespacedConfigMap({ namespace: 'nowhere', body: { metadata: { name: 'cfg' } } }));
    expect([missing.code, missing.status.message]).toEqual([404, 'namespaces "nowhere" not found']);
    const bad = await apiError(core.createNamespace({ body: { metadata: { name: 'Not_A_Label' } } }));
    expect(bad.code).toBe(422);
    expect(bad.status.message).toContain('Namespace "Not_A_Label" is invalid: metadata.name: Invalid value: "Not_A_Label": a lowercase RFC 1123 label');

    await core.deleteNamespace({ name: 'egress' });
    expect(kube.listObjects('', 'v1', 'configmaps', 'egress')).toEqual([]);
    expect(kube.listObjects('', 'v1', 'serviceaccounts', 'egress')).toEqual([]);
    expect((await apiError(core.createNamespacedConfigMap({ namespace: 'egress', body: { metadata: { name: 'cfg' } } }))).code).toBe(404);
  });

  it('stores Deployments and StatefulSets with defaults, generation and a status subresource, and checks selector and template', async () => {
    const apps = kube.kubeConfig().makeApiClient(AppsV1Api);
    const created = await apps.createNamespacedDeployment({ namespace: 'default', body: deployment('api', 2) });
    expect(created).toMatchObject({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { generation: 1 }, spec: { replicas: 2, revisionHistoryLimit: 10 } });
    const scaled = await apps.patchNamespacedDeployment(
      { namespace: 'default', name: 'api', body: { spec: { replicas: 3 } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    expect(scaled.metadata?.generation).toBe(2);
    const st = await apps.replaceNamespacedDeploymentStatus({ namespace: 'default', name: 'api', body: { ...scaled, status: { readyReplicas: 3 } } });
    expect(st).toMatchObject({ metadata: { generation: 2 }, status: { readyReplicas: 3 } });

    const noSelector = await apiError(
      apps.createNamespacedDeployment({ namespace: 'default', body: { metadata: { name: 'x' }, spec: { template: {} } } as never }),
    );
    expect(noSelector.code).toBe(422);
    expect(noSelector.status.message).toBe('Deployment.apps "x" is invalid: spec.selector: Required value');
    const neither = await apiError(apps.createNamespacedDeployment({ namespace: 'default', body: { metadata: { name: 'x' }, spec: {} } as never }));
    expect(neither.status.message).toBe('Deployment.apps "x" is invalid: [spec.selector: Required value, spec.template: Required value]');
    const mismatch = deployment('y');
    mismatch.spec!.selector = { matchLabels: { app: 'other' } };
    expect((await apiError(apps.createNamespacedDeployment({ namespace: 'default', body: mismatch }))).status.message).toContain(
      '`selector` does not match template `labels`',
    );

    await apps.createNamespacedStatefulSet({
      namespace: 'default',
      body: { metadata: { name: 'redis' }, spec: { ...deployment('redis').spec!, serviceName: 'redis' } },
    });
    expect((await apps.listNamespacedStatefulSet({ namespace: 'default' })).items.map((s) => s.metadata?.name)).toEqual(['redis']);
    const gone = await apps.deleteNamespacedDeployment({ namespace: 'default', name: 'api' });
    expect(gone).toMatchObject({ kind: 'Status', status: 'Success', details: { name: 'api', group: 'apps', kind: 'deployments' } });
  });

  it('stores RBAC objects: an aggregated ClusterRole, bindings with an immutable roleRef', async () => {
    const rbac = kube.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    const agg = await rbac.createClusterRole({
      body: { metadata: { name: 'egress-view' }, aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'egress/aggregate': 'true' } }] }, rules: [] },
    });
    expect(agg.aggregationRule?.clusterRoleSelectors).toHaveLength(1);
    await rbac.createNamespacedRole({
      namespace: 'default',
      body: { metadata: { name: 'r' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }] },
    });
    const noVerbs = await apiError(
      rbac.createNamespacedRole({ namespace: 'default', body: { metadata: { name: 'r2' }, rules: [{ apiGroups: [''], resources: ['pods'] }] } as never }),
    );
    expect(noVerbs.status.message).toBe('Role.rbac.authorization.k8s.io "r2" is invalid: rules[0].verbs: Required value');
    const binding = await rbac.createNamespacedRoleBinding({
      namespace: 'default',
      body: {
        metadata: { name: 'b' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'r' },
        subjects: [{ kind: 'ServiceAccount', name: 'api' }],
      },
    });
    const changed = await apiError(
      rbac.replaceNamespacedRoleBinding({ namespace: 'default', name: 'b', body: { ...binding, roleRef: { ...binding.roleRef, name: 'other' } } }),
    );
    expect(changed.code).toBe(422);
    expect(changed.status.message).toContain('roleRef: Invalid value');
    await rbac.createClusterRoleBinding({
      body: { metadata: { name: 'cb' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'egress-view' }, subjects: [] },
    });
    expect((await rbac.listClusterRoleBinding()).items.map((b) => b.metadata?.name)).toEqual(['cb']);
  });

  it('stores a PodDisruptionBudget, refusing minAvailable with maxUnavailable', async () => {
    const policy = kube.kubeConfig().makeApiClient(PolicyV1Api);
    const pdb = await policy.createNamespacedPodDisruptionBudget({
      namespace: 'default',
      body: { metadata: { name: 'api' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'api' } } } },
    });
    expect(pdb.metadata?.generation).toBe(1);
    const both = await apiError(
      policy.createNamespacedPodDisruptionBudget({ namespace: 'default', body: { metadata: { name: 'x' }, spec: { minAvailable: 1, maxUnavailable: 1 } } }),
    );
    expect(both.code).toBe(422);
  });

  it('serves the built-in kinds in discovery', async () => {
    const get = async (path: string): Promise<{ resources: { name: string }[] }> =>
      (await (await fetch(kube.url + path, { headers: { Authorization: `Bearer ${kube.token}` } })).json()) as never;
    expect((await get('/api/v1')).resources.map((r) => r.name)).toEqual(
      expect.arrayContaining(['namespaces', 'namespaces/status', 'serviceaccounts', 'configmaps', 'pods', 'secrets', 'services']),
    );
    expect((await get('/apis/apps/v1')).resources.map((r) => r.name)).toEqual(['deployments', 'deployments/status', 'statefulsets', 'statefulsets/status']);
    expect((await get('/apis/rbac.authorization.k8s.io/v1')).resources.map((r) => r.name)).toEqual([
      'roles',
      'clusterroles',
      'rolebindings',
      'clusterrolebindings',
    ]);
    expect((await get('/apis/policy/v1')).resources.map((r) => r.name)).toEqual(['poddisruptionbudgets', 'poddisruptionbudgets/status']);
  });
});
