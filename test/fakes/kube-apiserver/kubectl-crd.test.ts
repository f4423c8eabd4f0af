/**
 * Second-client cross-check of CRDs, custom resources and the install's built-in kinds: the real kubectl
 * (Debian's 1.32, when installed) applies, reads (server-side printer columns), watches and deletes.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { waitFor } from '../../support/wait.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';
import { KubectlHarness } from './kubectl-harness.ts';
import { GROUP, minimalCrd, widgetCrd } from './test-crds.ts';
import { describeWithTool } from '../../support/required-tools.ts';

let kube: FakeKubeApiserver;
let k: KubectlHarness;
const children: { child: { kill: () => boolean }; exited: Promise<unknown> }[] = [];

beforeEach(async () => {
  kube = await startFakeKubeApiserver({ tls: true });
  k = await KubectlHarness.create(kube);
});
afterEach(async () => {
  for (const c of children.splice(0)) {
    c.child.kill();
    await c.exited;
  }
  await kube.close();
});

const widgetYaml = (name: string, spec: Record<string, unknown>, finalizers?: string[]): string =>
  stringify({ apiVersion: `${GROUP}/v1`, kind: 'Widget', metadata: { name, namespace: 'default', ...(finalizers ? { finalizers } : {}) }, spec });

/** The install's kinds, one document each (what deploy/kubernetes renders, in miniature). */
function installYaml(): string {
  const labels = { app: 'egress-api' };
  const podTemplate = { metadata: { labels }, spec: { containers: [{ name: 'api', image: 'egress:1', securityContext: { readOnlyRootFilesystem: true } }] } };
  const docs = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'egress' } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'api', namespace: 'egress' } },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'config', namespace: 'egress' }, data: { LOG_LEVEL: 'info' } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'widget-viewer', labels: { 'rbac.authorization.k8s.io/aggregate-to-view': 'true' } },
      rules: [{ apiGroups: [GROUP], resources: ['widgets'], verbs: ['get', 'list', 'watch'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'aggregated' },
      aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'example.com/aggregate': 'true' } }] },
      rules: [],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'widget-viewer' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'widget-viewer' },
      subjects: [{ kind: 'ServiceAccount', name: 'api', namespace: 'egress' }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'status-writer', namespace: 'egress' },
      rules: [{ apiGroups: [GROUP], resources: ['widgets/status'], verbs: ['patch', 'update'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'status-writer', namespace: 'egress' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'status-writer' },
      subjects: [{ kind: 'ServiceAccount', name: 'api', namespace: 'egress' }],
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'api', namespace: 'egress' },
      spec: { replicas: 2, selector: { matchLabels: labels }, template: podTemplate },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'redis', namespace: 'egress' },
      spec: { serviceName: 'redis', selector: { matchLabels: labels }, template: podTemplate },
    },
    {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: { name: 'api', namespace: 'egress' },
      spec: { minAvailable: 1, selector: { matchLabels: labels } },
    },
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'api', namespace: 'egress' }, spec: { selector: labels, ports: [{ port: 8080 }] } },
    {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'ServiceMonitor',
      metadata: { name: 'api', namespace: 'egress' },
      spec: { selector: { matchLabels: labels }, endpoints: [{ port: 'http', path: '/metrics' }] },
    },
    {
      apiVersion: 'keda.sh/v1alpha1',
      kind: 'ScaledObject',
      metadata: { name: 'worker', namespace: 'egress' },
      spec: { scaleTargetRef: { name: 'worker' }, minReplicaCount: 1, maxReplicaCount: 10, triggers: [{ type: 'redis', metadata: { listName: 'q:wait' } }] },
    },
  ];
  return docs.map((d) => stringify(d)).join('---\n');
}

describeWithTool('kubectl', 'kubectl against the fake apiserver: CRDs and the install', { timeout: 120_000 }, () => {
  it('applies a CRD, then custom resources (create, configure, unchanged), and prints the printer columns by short name', async () => {
    const crd = await k.file('crd.yaml', stringify(widgetCrd()));
    expect((await k.run('apply', '-f', crd)).stdout).toContain(`customresourcedefinition.apiextensions.k8s.io/widgets.${GROUP} created`);
    expect((await k.run('get', 'crd')).stdout).toMatch(new RegExp(`^widgets\\.${GROUP}\\s+\\d{4}-`, 'm'));

    const w1 = await k.file('w1.yaml', widgetYaml('w1', { color: 'red', size: 3 }));
    expect((await k.run('apply', '-f', w1)).stdout).toContain(`widget.${GROUP}/w1 created`);
    expect((await k.run('apply', '-f', w1)).stdout).toContain(`widget.${GROUP}/w1 unchanged`);
    await k.file('w1.yaml', widgetYaml('w1', { color: 'red', size: 4 }));
    expect((await k.run('apply', '-f', w1)).stdout).toContain(`widget.${GROUP}/w1 configured`);
    const patch = kube.requests.filter((r) => r.method === 'PATCH').at(-1)!;
    expect(patch.contentType).toBe('application/merge-patch+json');
    expect(kube.getObject(GROUP, 'v1', 'widgets', 'default', 'w1')).toMatchObject({
      metadata: { generation: 2, annotations: { 'kubectl.kubernetes.io/last-applied-configuration': expect.any(String) } },
      spec: { size: 4 },
    });

    kube.updateObject(GROUP, 'v1', 'widgets', 'default', 'w1', (o) => (o.status = { conditions: [{ type: 'Ready', status: 'True' }] }), 'status');
    const table = await k.run('get', 'wd');
    expect(table.code).toBe(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header!.split(/\s+/)).toEqual(['NAME', 'SIZE', 'READY', 'AGE']);
    expect(row!.split(/\s+/).slice(0, 3)).toEqual(['w1', '4', 'True']);
    expect(row!.split(/\s+/)[3]).toMatch(/^\d+s$/);
    expect(kube.requests.filter((r) => r.path === `/apis/${GROUP}/v1/namespaces/default/widgets`).at(-1)!.accept).toContain('as=Table');

    const yaml = await k.run('get', 'wd', 'w1', '-o', 'yaml');
    expect(yaml.stdout).toContain(`apiVersion: ${GROUP}/v1`);
    expect(yaml.stdout).toContain('kind: Widget');
    expect(yaml.stdout).toMatch(/status:\n\s+conditions:/);

    const invalid = await k.run('apply', '-f', await k.file('bad.yaml', widgetYaml('bad', { color: 'green' })));
    expect(invalid.code).not.toBe(0);
    // kubectl rewords a 422 from its details: `The <kind> "<name>" is invalid: <causes>`.
    expect(invalid.stderr).toContain('The Widget "bad" is invalid: spec.color: Unsupported value: "green": supported values: "red", "blue"');
  });

  it('prints a change under get -w', async () => {
    kube.registerCrd(widgetCrd());
    await k.run('apply', '-f', await k.file('w1.yaml', widgetYaml('w1', { color: 'red', size: 3 })));
    const watching = k.start('get', 'wd', '-w');
    children.push(watching);
    await waitFor('the first row', () => /\nw1\s+3\s/.test(watching.output()));
    kube.updateObject(GROUP, 'v1', 'widgets', 'default', 'w1', (o) => ((o.spec as { size: number }).size = 7));
    await waitFor('the changed row', () => /\nw1\s+7\s/.test(watching.output()));
    expect(watching.output().match(/NAME/g)).toHaveLength(1);
  });

  it('deletes a custom resource and waits until its finalizer is removed', async () => {
    kube.registerCrd(widgetCrd());
    await k.run('apply', '-f', await k.file('w2.yaml', widgetYaml('w2', { color: 'blue' }, ['example.com/cleanup'])));
    const watchStarted = new Promise<void>((resolve) => {
      const onRequest = (r: { query: Record<string, string> }): void => {
        if (r.query.watch === 'true' && r.query.fieldSelector === 'metadata.name=w2') {
          kube.off('request', onRequest);
          resolve();
        }
      };
      kube.on('request', onRequest);
    });
    const deleting = k.run('delete', 'wd', 'w2', '--timeout=60s');
    await watchStarted;
    expect(kube.getObject(GROUP, 'v1', 'widgets', 'default', 'w2')?.metadata.deletionTimestamp).toBeDefined();
    kube.updateObject(GROUP, 'v1', 'widgets', 'default', 'w2', (o) => delete o.metadata.finalizers);
    const r = await deleting;
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`widget.${GROUP} "w2" deleted`);
    expect(kube.getObject(GROUP, 'v1', 'widgets', 'default', 'w2')).toBeUndefined();
  });

  it('applies the install (many documents, several kinds, third-party kinds from minimal CRDs), client-side and then server-side', async () => {
    kube.registerCrd(minimalCrd('monitoring.coreos.com', 'ServiceMonitor', 'servicemonitors'));
    kube.registerCrd(minimalCrd('keda.sh', 'ScaledObject', 'scaledobjects', 'v1alpha1'));
    const file = await k.file('install.yaml', installYaml());
    const created = await k.run('apply', '-f', file);
    expect(created.code).toBe(0);
    for (const line of [
      'namespace/egress created',
      'serviceaccount/api created',
      'configmap/config created',
      'clusterrole.rbac.authorization.k8s.io/aggregated created',
      'clusterrolebinding.rbac.authorization.k8s.io/widget-viewer created',
      'role.rbac.authorization.k8s.io/status-writer created',
      'rolebinding.rbac.authorization.k8s.io/status-writer created',
      'deployment.apps/api created',
      'statefulset.apps/redis created',
      'poddisruptionbudget.policy/api created',
      'service/api created',
      'servicemonitor.monitoring.coreos.com/api created',
      'scaledobject.keda.sh/worker created',
    ]) {
      expect(created.stdout).toContain(line);
    }
    expect((await k.run('apply', '-f', file)).stdout).toContain('deployment.apps/api unchanged');
    const ssa = await k.run('apply', '--server-side', '-f', file);
    expect(ssa.code).toBe(0);
    expect(ssa.stdout).toContain('deployment.apps/api serverside-applied');
    expect(kube.getObject('apps', 'v1', 'deployments', 'egress', 'api')).toMatchObject({ metadata: { generation: 1 }, spec: { replicas: 2 } });
    expect(kube.getObject('rbac.authorization.k8s.io', 'v1', 'clusterroles', undefined, 'aggregated')?.aggregationRule).toBeDefined();
    expect((await k.run('get', 'deploy,sts,pdb,cm,sa', '-n', 'egress', '-o', 'name')).stdout.trim().split('\n')).toEqual([
      'deployment.apps/api',
      'statefulset.apps/redis',
      'poddisruptionbudget.policy/api',
      'configmap/config',
      'serviceaccount/api',
    ]);
    expect(kube.getObject('keda.sh', 'v1alpha1', 'scaledobjects', 'egress', 'worker')?.spec).toMatchObject({ maxReplicaCount: 10 });
    const deleted = await k.run('delete', 'namespace', 'egress');
    expect(deleted.code).toBe(0);
    expect(kube.listObjects('apps', 'v1', 'deployments')).toEqual([]);
    expect(kube.getService('egress', 'api')).toBeUndefined();
  });
});
