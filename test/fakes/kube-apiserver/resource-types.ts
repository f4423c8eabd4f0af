/**
 * The kinds the fake stores generically (resource-store.ts): what discovery says about each, and the modest
 * per-kind checks and defaults of the built-ins the install applies (Namespace, ServiceAccount, ConfigMap, RBAC,
 * Deployment, StatefulSet, PodDisruptionBudget, CustomResourceDefinition). Custom resources get their type
 * from a CRD (crd-registry.ts).
 */
import type { FieldError, Schema } from './structural-schema.ts';

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  format?: string;
  description?: string;
  priority?: number;
}

/** A stored object as JSON. */
export type StoredObject = {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid: string;
    resourceVersion: string;
    creationTimestamp: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    finalizers?: string[];
    ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; [k: string]: unknown }[];
    deletionTimestamp?: string;
    deletionGracePeriodSeconds?: number;
    [k: string]: unknown;
  };
  [k: string]: unknown;
};

export interface ResourceType {
  group: string;
  /** Versions served; objects are shared between them (no conversion: only `apiVersion` changes). */
  versions: string[];
  plural: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  verbs: string[];
  /** A `/status` subresource: the main resource ignores `.status`, `/status` changes only it. */
  statusSubresource: boolean;
  /** `metadata.name` rule: RFC 1123 subdomain (most kinds), label (namespaces), or path segment (RBAC). */
  nameRule: 'subdomain' | 'label' | 'path';
  /** PUT without a resourceVersion is allowed (most built-ins) or 422 (custom resources). */
  unconditionalUpdate: boolean;
  /** `metadata.generation` is kept (custom resources, CRDs, workloads, PodDisruptionBudgets). */
  generation: boolean;
  /** DELETE answers the object (custom resources, namespaces) rather than a Status. */
  deleteReturnsObject: boolean;
  /** From a CRD: the structural schema (per version) and printer columns. */
  schemas?: Record<string, Schema>;
  printerColumns?: Record<string, PrinterColumn[]>;
  /** Built-in checks and defaults (in place); returns field errors. */
  admit?(obj: Record<string, unknown>, old: StoredObject | undefined): FieldError[];
}

/** `<plural>.<group>`, or `<plural>` for the core group: how errors name a resource. */
export const qualified = (t: Pick<ResourceType, 'plural' | 'group'>): string => (t.group ? `${t.plural}.${t.group}` : t.plural);
/** `<Kind>.<group>`, or `<Kind>` for the core group: how 422 messages name a kind. */
export const qualifiedKind = (t: Pick<ResourceType, 'kind' | 'group'>): string => (t.group ? `${t.kind}.${t.group}` : t.kind);
export const groupVersion = (group: string, version: string): string => (group ? `${group}/${version}` : version);

const ALL_VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
const required = (field: string): FieldError => ({ reason: 'FieldValueRequired', field, message: 'Required value' });
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function builtin(group: string, kind: string, plural: string, namespaced: boolean, more: Partial<ResourceType> = {}): ResourceType {
  return {
    group,
    versions: ['v1'],
    plural,
    singular: kind.toLowerCase(),
    kind,
    namespaced,
    verbs: ALL_VERBS,
    statusSubresource: false,
    nameRule: 'subdomain',
    unconditionalUpdate: true,
    deleteReturnsObject: false,
    generation: false,
    ...more,
  };
}

function rules(obj: Record<string, unknown>): FieldError[] {
  const list = obj.rules;
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) return [{ reason: 'FieldValueInvalid', field: 'rules', message: `Invalid value: ${JSON.stringify(list)}: must be a list` }];
  return list.flatMap((r: unknown, i) => (isObject(r) && Array.isArray(r.verbs) && r.verbs.length > 0 ? [] : [required(`rules[${i}].verbs`)]));
}

function roleRef(obj: Record<string, unknown>, old: StoredObject | undefined): FieldError[] {
  const ref = obj.roleRef;
  if (!isObject(ref)) return [required('roleRef')];
  const errors: FieldError[] = [];
  if (!ref.kind) errors.push(required('roleRef.kind'));
  if (!ref.name) errors.push(required('roleRef.name'));
  if (old && JSON.stringify(old.roleRef) !== JSON.stringify(ref)) {
    errors.push({ reason: 'FieldValueInvalid', field: 'roleRef', message: `Invalid value: ${JSON.stringify(ref)}: cannot change roleRef` });
  }
  return errors;
}

/** Deployment / StatefulSet: selector and template required, the selector must match the template's labels. */
function workload(obj: Record<string, unknown>): FieldError[] {
  const spec = obj.spec;
  if (!isObject(spec)) return [required('spec.selector'), required('spec.template')];
  const errors: FieldError[] = [];
  const selector = spec.selector;
  const template = spec.template;
  if (!isObject(selector)) errors.push(required('spec.selector'));
  if (!isObject(template)) errors.push(required('spec.template'));
  if (isObject(selector) && isObject(template)) {
    const labels = (isObject(template.metadata) ? template.metadata.labels : undefined) as Record<string, string> | undefined;
    const wanted = (selector.matchLabels ?? {}) as Record<string, string>;
    if (!Object.entries(wanted).every(([k, v]) => labels?.[k] === v)) {
      errors.push({
        reason: 'FieldValueInvalid',
        field: 'spec.template.metadata.labels',
        message: `Invalid value: ${JSON.stringify(labels ?? {})}: \`selector\` does not match template \`labels\``,
      });
    }
    const podSpec = template.spec;
    if (!isObject(podSpec) || !Array.isArray(podSpec.containers) || podSpec.containers.length === 0) errors.push(required('spec.template.spec.containers'));
  }
  spec.replicas ??= 1;
  spec.revisionHistoryLimit ??= 10;
  return errors;
}

/** The built-in kinds stored generically. */
export function builtinTypes(): ResourceType[] {
  return [
    builtin('', 'Namespace', 'namespaces', false, {
      shortNames: ['ns'],
      statusSubresource: true,
      nameRule: 'label',
      deleteReturnsObject: true,
      admit: (obj) => {
        const name = (obj.metadata as { name: string }).name;
        const meta = obj.metadata as { labels?: Record<string, string> };
        meta.labels = { ...meta.labels, 'kubernetes.io/metadata.name': name };
        obj.spec = { finalizers: ['kubernetes'] };
        obj.status = { phase: 'Active' };
        return [];
      },
    }),
    builtin('', 'ServiceAccount', 'serviceaccounts', true, { shortNames: ['sa'] }),
    builtin('', 'ConfigMap', 'configmaps', true, { shortNames: ['cm'] }),
    builtin('rbac.authorization.k8s.io', 'Role', 'roles', true, { nameRule: 'path', admit: rules }),
    builtin('rbac.authorization.k8s.io', 'ClusterRole', 'clusterroles', false, { nameRule: 'path', admit: rules }),
    builtin('rbac.authorization.k8s.io', 'RoleBinding', 'rolebindings', true, { nameRule: 'path', admit: roleRef }),
    builtin('rbac.authorization.k8s.io', 'ClusterRoleBinding', 'clusterrolebindings', false, { nameRule: 'path', admit: roleRef }),
    builtin('apps', 'Deployment', 'deployments', true, {
      shortNames: ['deploy'],
      categories: ['all'],
      statusSubresource: true,
      generation: true,
      admit: workload,
    }),
    builtin('apps', 'StatefulSet', 'statefulsets', true, {
      shortNames: ['sts'],
      categories: ['all'],
      statusSubresource: true,
      generation: true,
      admit: workload,
    }),
    builtin('policy', 'PodDisruptionBudget', 'poddisruptionbudgets', true, {
      shortNames: ['pdb'],
      statusSubresource: true,
      generation: true,
      admit: (obj) => {
        const spec = obj.spec;
        if (isObject(spec) && spec.minAvailable !== undefined && spec.maxUnavailable !== undefined) {
          return [{ reason: 'FieldValueInvalid', field: 'spec', message: 'Invalid value: "": minAvailable and maxUnavailable cannot be both set' }];
        }
        return [];
      },
    }),
    builtin('apiextensions.k8s.io', 'CustomResourceDefinition', 'customresourcedefinitions', false, {
      shortNames: ['crd', 'crds'],
      categories: ['api-extensions'],
      statusSubresource: true,
      generation: true,
      printerColumns: { v1: [{ name: 'Created At', type: 'string', format: 'date', jsonPath: '.metadata.creationTimestamp' }] },
      deleteReturnsObject: true,
    }),
  ];
}
