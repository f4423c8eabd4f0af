/**
 * The Kubernetes install (deploy/kubernetes): it renders with the machine's kubectl (kustomize),
 * every object is valid against the OpenAPI schema of its kind, every container is locked down,
 * each role's ServiceAccount gets only what its work needs, the Deployments' command lines are
 * accepted by the real CLI, and KEDA watches the very lists BullMQ keeps waiting jobs in.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { DEFAULT_PREFIX, QUEUES } from '../../queues/names.ts';
import { parseConfigDocument, parseYaml } from '../../src/config/file.ts';
import { at, find, grantsOf, renderInstall, resourcesOf, validateObject, TEST_PROMETHEUS_TOKEN, type KubeObject } from '../support/kube-install.ts';
import { materializeContainer } from '../support/kube-pod-files.ts';
import { uniquePrefix } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { describeWithTool } from '../support/required-tools.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const ROLES = ['scheduler', 'worker', 'publisher', 'api'] as const;
const NS = 'egress-proxies';
const FLEET_NS = 'egress-proxies-fleet';

interface Container {
  name: string;
  image: string;
  args?: string[];
  ports?: { name: string; containerPort: number }[];
  securityContext?: Record<string, unknown>;
  livenessProbe?: { httpGet?: { path: string; port: string } };
  readinessProbe?: { httpGet?: { path: string; port: string } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}

const podOf = (w: KubeObject) =>
  at<{ containers: Container[]; securityContext?: Record<string, unknown>; volumes?: { name: string; emptyDir?: object }[] }>(w, 'spec.template.spec')!;
const workloads = (objects: KubeObject[]) => objects.filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet');

describeWithTool('kubectl', 'the Kubernetes install (kubectl kustomize deploy/kubernetes)', { timeout: 120_000 }, () => {
  it('renders, and every object of every variant is valid against its kind’s schema', async () => {
    for (const variant of ['default', 'keda', 'managed-redis', 'managed-redis-keda', 'without-prometheus-operator'] as const) {
      const { objects } = await renderInstall(variant);
      expect(objects.length, variant).toBeGreaterThan(30);
      for (const obj of objects) validateObject(obj);
    }
  });

  it('holds the CRDs, a namespace, a ServiceAccount, Deployment and PodDisruptionBudget per role, the API Service, a ServiceMonitor and the trial Redis', async () => {
    const { objects } = await renderInstall();
    const names = (kind: string) => objects.filter((o) => o.kind === kind).map((o) => o.metadata.name);
    expect(names('CustomResourceDefinition').sort()).toEqual([
      'providerhealths.egress-proxies.io',
      'proxies.egress-proxies.io',
      'proxypools.egress-proxies.io',
    ]);
    expect(names('Namespace').sort()).toEqual([NS, FLEET_NS]);
    expect(names('ServiceAccount').sort()).toEqual(ROLES.map((r) => `egress-${r}`).sort());
    expect(names('Deployment').sort()).toEqual(ROLES.map((r) => `egress-${r}`).sort());
    expect(names('PodDisruptionBudget').sort()).toEqual(ROLES.map((r) => `egress-${r}`).sort());
    expect(at(find(objects, 'Deployment', 'egress-scheduler'), 'spec.replicas')).toBe(2);
    expect(at(find(objects, 'Service', 'egress-api'), 'spec.ports')).toEqual([{ name: 'http', port: 8080, targetPort: 'http' }]);
    expect(at(find(objects, 'StatefulSet', 'egress-redis'), 'spec.template.spec.containers.0.args')).toEqual(
      expect.arrayContaining(['--maxmemory-policy', 'noeviction']),
    );
    for (const obj of objects)
      if (!['Namespace', 'CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding'].includes(obj.kind))
        expect([NS, FLEET_NS], `${obj.kind}/${obj.metadata.name}`).toContain(obj.metadata.namespace);
  });

  it('runs the project’s image at this release’s version', async () => {
    const { version } = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const { objects } = await renderInstall();
    for (const role of ROLES)
      expect(podOf(find(objects, 'Deployment', `egress-${role}`)).containers[0]?.image).toBe(`ghcr.io/egress-proxies/egress:${version}`);
  });

  it('locks every container down: non-root, read-only root filesystem, no privilege escalation, no capabilities, RuntimeDefault seccomp; it writes only to emptyDirs and volume claims', async () => {
    for (const variant of ['default', 'keda'] as const) {
      const { objects } = await renderInstall(variant);
      for (const w of workloads(objects)) {
        const pod = podOf(w);
        expect(pod.securityContext, w.metadata.name).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
        // The image's user is named (node), so the kubelet can verify non-root only with a numeric uid.
        expect(pod.securityContext?.runAsUser as number, w.metadata.name).toBeGreaterThan(0);
        for (const c of pod.containers) {
          const where = `${w.metadata.name}/${c.name}`;
          expect(c.securityContext, where).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
          expect(c.securityContext?.privileged, where).not.toBe(true);
          expect(c.resources?.requests?.memory, where).toBeDefined();
          expect(c.resources?.limits?.memory, where).toBeDefined();
          const claims = (at<{ metadata: { name: string } }[]>(w, 'spec.volumeClaimTemplates') ?? []).map((t) => t.metadata.name);
          for (const m of c.volumeMounts ?? []) {
            const writable = claims.includes(m.name) || (pod.volumes ?? []).some((v) => v.name === m.name && v.emptyDir);
            expect(writable || m.readOnly === true, `${where}: ${m.mountPath}`).toBe(true);
          }
        }
      }
    }
  });

  it('probes each role on the listener it serves: /healthz to live, /readyz (Redis reachable) for the API to be ready', async () => {
    const { objects } = await renderInstall();
    for (const role of ROLES) {
      const c = podOf(find(objects, 'Deployment', `egress-${role}`)).containers[0]!;
      const port = role === 'api' ? 'http' : 'metrics';
      expect(c.ports, role).toEqual([{ name: port, containerPort: role === 'api' ? 8080 : 9464 }]);
      expect(c.livenessProbe?.httpGet, role).toEqual({ path: '/healthz', port });
      expect(c.readinessProbe?.httpGet, role).toEqual({ path: role === 'api' ? '/readyz' : '/healthz', port });
      // The probed port is the one the command line opens.
      expect(c.args, role).toEqual(expect.arrayContaining(role === 'api' ? ['--port', '8080'] : ['--metrics-port', '9464']));
    }
  });

  it('gives each Deployment a command line the real CLI accepts (--check-config), with the rendered config, tokens and Redis settings', async () => {
    for (const variant of ['default', 'managed-redis'] as const) {
      const { objects } = await renderInstall(variant);
      for (const role of ROLES) {
        const root = await tempDir(`egress-pod-${role}-`);
        const { args, env } = await materializeContainer(objects, find(objects, 'Deployment', `egress-${role}`), root);
        expect(args[0]).toBe(role);
        const r = await run(process.execPath, [join(ROOT, 'bin', 'egress.js'), ...args, '--check-config'], {
          // What the kubelet gives every Pod: the store and the kubernetes provider then use the in-cluster service account.
          // TMPDIR stays the run's, so that tsx's cache of the sources is not left in /tmp.
          env: { PATH: process.env.PATH ?? '', HOME: root, TMPDIR: tmpdir(), KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443', ...env },
        }).catch((err: { stdout: string; stderr: string; code: number }) => err);
        expect(`${r.stdout}${r.stderr}`, `${variant} ${role}: egress ${args.join(' ')}`).toContain(
          `configuration OK: ${role}, providers cluster (kubernetes), store kubernetes (namespace ${NS})`,
        );
      }
    }
  });

  it('ships a providers file the configuration schema accepts: the in-cluster kubernetes provider in the fleet namespace', async () => {
    const { objects } = await renderInstall();
    const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('egress-config-'));
    const text = at<Record<string, string>>(configMap, 'data')?.['egress.yaml'];
    const config = parseConfigDocument(parseYaml(text ?? '', 'egress.yaml'), 'egress.yaml');
    expect(config.providers).toEqual([expect.objectContaining({ type: 'kubernetes', namespace: FLEET_NS })]);
    expect(config.providers[0]).not.toHaveProperty('kubeconfig');
    expect(config.providers[0]).not.toHaveProperty('server');
  });

  it('grants the publisher nothing on ProviderHealth but reads and status writes, and nothing else at all', async () => {
    const { objects } = await renderInstall();
    const grants = grantsOf(objects, NS, 'egress-publisher');
    expect(grants.length).toBeGreaterThan(0);
    for (const { rule } of grants) {
      for (const res of resourcesOf(rule)) {
        // No create, update, patch or delete of the object: the leading scheduler creates it, the publisher writes status only.
        if (res === 'egress-proxies.io/providerhealths')
          expect(
            rule.verbs.every((v) => ['get', 'list', 'watch'].includes(v)),
            `${res}: ${rule.verbs.join(',')}`,
          ).toBe(true);
        else if (res === 'egress-proxies.io/providerhealths/status')
          expect(
            rule.verbs.every((v) => ['get', 'update', 'patch'].includes(v)),
            res,
          ).toBe(true);
        else throw new Error(`the publisher is granted ${rule.verbs.join(',')} on ${res}`);
      }
    }
  });

  it('grants Pod, Secret and Service rights only in namespaces (the provider’s in the fleet namespace), never cluster-wide, and no wildcards', async () => {
    const { objects } = await renderInstall();
    for (const role of ROLES) {
      for (const { role: by, scope, rule } of grantsOf(objects, NS, `egress-${role}`)) {
        expect([...rule.verbs, ...(rule.resources ?? []), ...(rule.apiGroups ?? [])], `${role} via ${by}`).not.toContain('*');
        for (const res of resourcesOf(rule)) {
          if (['pods', 'secrets', 'services'].includes(res)) expect(scope, `${role}: ${res} via ${by}`).not.toBe('cluster');
          if (res === 'pods' || res === 'services') expect([role, scope], `${res} via ${by}`).toEqual(['worker', FLEET_NS]);
        }
      }
    }
    const fleet = grantsOf(objects, NS, 'egress-worker').filter((g) => g.scope === FLEET_NS);
    expect(fleet.flatMap((g) => resourcesOf(g.rule)).sort()).toEqual(['pods', 'secrets', 'services']);
  });

  it('grants each role on ProxyPools only what its work needs, in the store namespace only', async () => {
    const { objects } = await renderInstall();
    const poolGrants = (role: (typeof ROLES)[number]): Record<string, string[]> => {
      const out: Record<string, string[]> = {};
      for (const { scope, rule } of grantsOf(objects, NS, `egress-${role}`)) {
        for (const res of resourcesOf(rule).filter((r) => r.startsWith('egress-proxies.io/proxypools'))) {
          expect(scope, `${role}: ${res}`).toBe(NS);
          out[res] = [...(out[res] ?? []), ...rule.verbs].sort();
        }
      }
      return out;
    };
    // The API applies and deletes pools, never their status (the pool reconcile writes it).
    expect(poolGrants('api')).toEqual({ 'egress-proxies.io/proxypools': ['create', 'delete', 'get', 'list', 'update'] });
    // The worker's pool reconcile: reads, status, and update for the members finalizer only; it never creates or deletes a pool.
    expect(poolGrants('worker')).toEqual({ 'egress-proxies.io/proxypools': ['get', 'list', 'update'], 'egress-proxies.io/proxypools/status': ['update'] });
    // The leading scheduler watches them.
    expect(poolGrants('scheduler')).toEqual({ 'egress-proxies.io/proxypools': ['list', 'watch'] });
    expect(poolGrants('publisher')).toEqual({});
  });

  it('aggregates reading ProviderHealth, Proxies and ProxyPools into view, and changing Proxies and ProxyPools into edit', async () => {
    const { objects } = await renderInstall();
    const viewer = find(objects, 'ClusterRole', 'egress-proxies-viewer');
    expect(viewer.metadata.labels).toMatchObject({ 'rbac.authorization.k8s.io/aggregate-to-view': 'true' });
    const viewRules = at<{ resources: string[]; verbs: string[] }[]>(viewer, 'rules') ?? [];
    expect(viewRules.flatMap((r) => r.resources)).toEqual(expect.arrayContaining(['providerhealths', 'proxies', 'proxypools', 'proxypools/status']));
    expect(viewRules.flatMap((r) => r.verbs).sort()).toEqual(['get', 'list', 'watch']);
    const editor = find(objects, 'ClusterRole', 'egress-proxies-editor');
    expect(editor.metadata.labels).toMatchObject({ 'rbac.authorization.k8s.io/aggregate-to-edit': 'true' });
    expect(editor.metadata.labels).not.toHaveProperty(['rbac.authorization.k8s.io/aggregate-to-view']);
    // Never a status, and never ProviderHealth: the orchestrator writes those.
    expect((at<{ resources: string[] }[]>(editor, 'rules') ?? []).flatMap((r) => r.resources)).toEqual(['proxies', 'proxypools']);
  });

  it('scrapes every role with a token of the API’s token file (ServiceMonitor)', async () => {
    const { objects } = await renderInstall();
    const monitor = find(objects, 'ServiceMonitor', 'egress');
    const endpoints = at<{ port: string; authorization: { credentials: { name: string; key: string } } }[]>(monitor, 'spec.endpoints') ?? [];
    expect(endpoints.map((e) => e.port).sort()).toEqual(['http', 'metrics']);
    for (const e of endpoints) {
      const secret = find(objects, 'Secret', e.authorization.credentials.name);
      const data = at<Record<string, string>>(secret, 'data') ?? {};
      const token = Buffer.from(data[e.authorization.credentials.key] ?? '', 'base64').toString();
      expect(token).toBe(TEST_PROMETHEUS_TOKEN);
      expect(Buffer.from(data['api-tokens'] ?? '', 'base64').toString()).toContain(`:${token}\n`);
    }
  });

  it('scales workers with KEDA on the wait list of each queue they take, and leaves their count to it', async () => {
    const { objects } = await renderInstall('keda');
    const worker = find(objects, 'Deployment', 'egress-worker');
    expect(at(worker, 'spec.replicas')).toBeUndefined();
    const args = podOf(worker).containers[0]?.args ?? [];
    const queues = args[args.indexOf('--queues') + 1]?.split(',') ?? [];
    const scaled = find(objects, 'ScaledObject', 'egress-worker');
    expect(at(scaled, 'spec.scaleTargetRef.name')).toBe('egress-worker');
    expect(at<number>(scaled, 'spec.minReplicaCount')).toBeGreaterThan(0);
    const triggers = at<{ type: string; metadata: Record<string, string> }[]>(scaled, 'spec.triggers') ?? [];
    expect(triggers.every((t) => t.type === 'redis')).toBe(true);
    expect(triggers.map((t) => t.metadata.listName).sort()).toEqual(queues.map((q) => `${DEFAULT_PREFIX}:${q}:wait`).sort());
    const policy = find(objects, 'NetworkPolicy', 'egress-redis');
    expect(JSON.stringify(at(policy, 'spec.ingress'))).toContain('"kubernetes.io/metadata.name":"keda"');
  });

  it('authenticates KEDA to a managed Redis with the roles’ password Secret', async () => {
    const { objects } = await renderInstall('managed-redis-keda');
    expect(objects.some((o) => o.kind === 'StatefulSet')).toBe(false);
    const auth = find(objects, 'TriggerAuthentication', 'egress-redis');
    const ref = at<{ name: string; key: string }[]>(auth, 'spec.secretTargetRef')?.[0];
    const secret = find(objects, 'Secret', ref?.name ?? '');
    expect(Buffer.from(at<Record<string, string>>(secret, 'data')?.[ref?.key ?? ''] ?? '', 'base64').toString()).not.toBe('');
    for (const t of at<{ authenticationRef?: { name: string } }[]>(find(objects, 'ScaledObject', 'egress-worker'), 'spec.triggers') ?? [])
      expect(t.authenticationRef?.name).toBe('egress-redis');
  });
});

describe('the lists KEDA watches', () => {
  it('are where BullMQ keeps a queue’s waiting jobs under the hash-tagged prefix', async () => {
    const prefix = uniquePrefix();
    const queue = new Queue(QUEUES.reconcile, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix });
    const redis = new Redis(inject('redisUrl'));
    try {
      await queue.add('reconcile', { proxy: 'p1' });
      await queue.add('reconcile', { proxy: 'p2' });
      // The ScaledObject's listName with this test's prefix in place of the default one.
      expect(await redis.llen(`${prefix}:${QUEUES.reconcile}:wait`)).toBe(2);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      redis.disconnect();
    }
  });
});
