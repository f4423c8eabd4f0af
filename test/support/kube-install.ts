/**
 * The Kubernetes install (deploy/kubernetes, deploy/kubernetes-overlays) as tests see it: rendered
 * by the machine's kubectl (its built-in kustomize), offline, from a copy that holds test token files
 * (the real ones are the user's and git-ignored), then each object checked against the OpenAPI
 * schema of its kind as kubernetes-models ships it.
 */
import { execFile } from 'node:child_process';
import { cp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { TriggerAuthentication } from '@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { tempDir } from './temp-dirs.ts';

const run = promisify(execFile);

/** The repository's deploy/ directory. */
export const DEPLOY_DIR = join(import.meta.dirname, '..', '..', 'deploy');

/** What a test writes as the user's files: two named tokens, Prometheus's also alone in prometheus-token. */
export const TEST_PROMETHEUS_TOKEN = 'prometheus-test-token-0123456789abcdef';
export const TEST_TOKENS = `prometheus:${TEST_PROMETHEUS_TOKEN}\nadmin:admin-test-token-0123456789abcdef\n`;
export const TEST_REDIS_PASSWORD = 'redis-test-password-0123456789';

/** A rendered object: only the fields every kind has are typed; the rest is read through `at`. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** Which install to render: the default, or one of deploy/kubernetes-overlays/. */
export type Variant = 'default' | 'keda' | 'managed-redis' | 'managed-redis-keda' | 'without-prometheus-operator';

/** Copies deploy/kubernetes and its overlays into a temporary directory with the user's files made up, and renders one. */
export async function renderInstall(variant: Variant = 'default'): Promise<{ yaml: string; objects: KubeObject[] }> {
  const dir = await tempDir('egress-kustomize-');
  await cp(join(DEPLOY_DIR, 'kubernetes'), join(dir, 'kubernetes'), { recursive: true });
  await cp(join(DEPLOY_DIR, 'kubernetes-overlays'), join(dir, 'kubernetes-overlays'), { recursive: true });
  await writeFile(join(dir, 'kubernetes', 'api-tokens'), TEST_TOKENS, { mode: 0o600 });
  await writeFile(join(dir, 'kubernetes', 'prometheus-token'), TEST_PROMETHEUS_TOKEN, { mode: 0o600 });
  await writeFile(join(dir, 'kubernetes-overlays', 'managed-redis', 'redis-password'), TEST_REDIS_PASSWORD, { mode: 0o600 });
  const target = variant === 'default' ? join(dir, 'kubernetes') : join(dir, 'kubernetes-overlays', variant);
  const { stdout } = await run('kubectl', ['kustomize', target], { maxBuffer: 16 * 1024 * 1024 });
  const objects = parseAllDocuments(stdout).map((d) => d.toJS() as KubeObject);
  return { yaml: stdout, objects };
}

type Validatable = new (data: never) => { validate(): void };

/** The schema of every kind the install may contain, by `apiVersion/kind`. */
const MODELS: Record<string, Validatable> = {
  'v1/Namespace': Namespace,
  'v1/ServiceAccount': ServiceAccount,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'apiextensions.k8s.io/v1/CustomResourceDefinition': CustomResourceDefinition,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
  'keda.sh/v1alpha1/TriggerAuthentication': TriggerAuthentication,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
};

/**
 * A Secret's `data` as the API server decodes it: kustomize wraps long base64 values at 76
 * characters, and Go's base64 decoder skips line breaks, where the schema's `byte` format does not.
 */
function asDecoded(obj: KubeObject): KubeObject {
  const data = obj.kind === 'Secret' ? (obj.data as Record<string, string> | undefined) : undefined;
  if (!data) return obj;
  return { ...obj, data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.replace(/[\r\n]/g, '')])) };
}

/** Validates `obj` against its kind's schema; the error names the object and the schema's complaint. */
export function validateObject(obj: KubeObject): void {
  const Model = MODELS[`${obj.apiVersion}/${obj.kind}`];
  if (!Model) throw new Error(`${obj.kind}/${obj.metadata.name}: no schema for ${obj.apiVersion} ${obj.kind}`);
  try {
    new Model(asDecoded(obj) as never).validate();
  } catch (err) {
    throw new Error(`${obj.kind}/${obj.metadata.name}: ${(err as Error).message}`, { cause: err });
  }
}

/** The value at a dotted path (`spec.template.spec`), or undefined. */
export function at<T = unknown>(obj: unknown, path: string): T | undefined {
  let cur: unknown = obj;
  for (const key of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur as T | undefined;
}

export function find(objects: readonly KubeObject[], kind: string, name: string): KubeObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`the install has no ${kind} ${name} (it has: ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')})`);
  return found;
}

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
}

/** One rule as granted to a ServiceAccount: by which role, and where (a namespace, or the cluster). */
export interface Grant {
  role: string;
  scope: string;
  rule: PolicyRule;
}

/** Every rule the install grants `namespace/name` (a ServiceAccount) through its bindings. */
export function grantsOf(objects: readonly KubeObject[], namespace: string, name: string): Grant[] {
  const grants: Grant[] = [];
  for (const b of objects.filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding')) {
    const subjects = at<{ kind: string; name: string; namespace?: string }[]>(b, 'subjects') ?? [];
    if (!subjects.some((s) => s.kind === 'ServiceAccount' && s.name === name && s.namespace === namespace)) continue;
    const ref = at<{ kind: string; name: string }>(b, 'roleRef');
    if (!ref) continue;
    const role = objects.find(
      (o) => o.kind === ref.kind && o.metadata.name === ref.name && (ref.kind === 'ClusterRole' || o.metadata.namespace === b.metadata.namespace),
    );
    if (!role) throw new Error(`${b.kind}/${b.metadata.name} refers to ${ref.kind} ${ref.name}, which the install does not have`);
    const scope = b.kind === 'RoleBinding' ? (b.metadata.namespace ?? '') : 'cluster';
    for (const rule of at<PolicyRule[]>(role, 'rules') ?? []) grants.push({ role: `${role.kind}/${role.metadata.name}`, scope, rule });
  }
  return grants;
}

/** `group/resource` pairs a grant covers. */
export function resourcesOf(rule: PolicyRule): string[] {
  return (rule.apiGroups ?? ['']).flatMap((g) => (rule.resources ?? []).map((r) => (g ? `${g}/${r}` : r)));
}
