/**
 * CustomResourceDefinitions (apiextensions.k8s.io/v1) as the fake serves them: a CRD is stored like any
 * other object (resource-store.ts) with these checks and defaults, and each stored CRD becomes a served
 * type (its plural, short names, scope, versions, status subresource, structural schema and printer
 * columns). What the real apiextensions controllers do asynchronously is done right after the write (a
 * microtask): status `NamesAccepted` and `Established` True, `acceptedNames`, `storedVersions`. Deleting a
 * CRD removes its custom resources at once (the real one goes through a cleanup finalizer).
 */
import { structuralErrors } from './crd-schema-checks.ts';
import { typeKey, type ResourceStore } from './resource-store.ts';
import type { PrinterColumn, ResourceType, StoredObject } from './resource-types.ts';
import type { FieldError, Schema } from './structural-schema.ts';

export const CRD_KEY = 'apiextensions.k8s.io/customresourcedefinitions';

interface CrdVersion {
  name?: string;
  served?: boolean;
  storage?: boolean;
  schema?: { openAPIV3Schema?: Schema };
  subresources?: { status?: object; scale?: object };
  additionalPrinterColumns?: PrinterColumn[];
}

interface CrdSpec {
  group?: string;
  scope?: string;
  names?: { plural?: string; singular?: string; kind?: string; listKind?: string; shortNames?: string[]; categories?: string[] };
  versions?: CrdVersion[];
  conversion?: { strategy?: string };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const required = (field: string, detail = ''): FieldError => ({
  reason: 'FieldValueRequired',
  field,
  message: detail ? `Required value: ${detail}` : 'Required value',
});
const invalidValue = (field: string, value: unknown, detail: string): FieldError => ({
  reason: 'FieldValueInvalid',
  field,
  message: `Invalid value: ${JSON.stringify(value)}: ${detail}`,
});

/** Checks and defaults of a CRD (in place), as the `admit` of the customresourcedefinitions type. */
export function admitCrd(obj: Record<string, unknown>, old: StoredObject | undefined): FieldError[] {
  const errors: FieldError[] = [];
  if (!isObject(obj.spec)) return [required('spec.group'), required('spec.names.plural'), required('spec.names.kind'), required('spec.versions')];
  const spec = obj.spec as CrdSpec;
  const names = (spec.names ??= {});
  const name = (obj.metadata as { name: string }).name;
  if (!spec.group) errors.push(required('spec.group'));
  else if (!spec.group.includes('.')) errors.push(invalidValue('spec.group', spec.group, 'should be a domain with at least one dot'));
  if (!names.plural) errors.push(required('spec.names.plural'));
  if (!names.kind) errors.push(required('spec.names.kind'));
  if (spec.group && names.plural && name !== `${names.plural}.${spec.group}`) {
    errors.push(invalidValue('metadata.name', name, 'must be spec.names.plural+"."+spec.group'));
  }
  if (spec.scope !== 'Namespaced' && spec.scope !== 'Cluster') {
    errors.push({
      reason: 'FieldValueNotSupported',
      field: 'spec.scope',
      message: `Unsupported value: ${JSON.stringify(spec.scope ?? '')}: supported values: "Cluster", "Namespaced"`,
    });
  }
  if (old && isObject(old.spec) && (old.spec as CrdSpec).scope !== spec.scope) {
    errors.push(invalidValue('spec.scope', spec.scope, 'field is immutable'));
  }
  const versions = spec.versions ?? [];
  if (versions.length === 0) errors.push(required('spec.versions', 'must have exactly one version marked as storage version'));
  else if (versions.filter((v) => v.storage).length !== 1)
    errors.push(
      invalidValue(
        'spec.versions',
        versions.map((v) => v.name),
        'must have exactly one version marked as storage version',
      ),
    );
  versions.forEach((v, i) => {
    if (!v.name) errors.push(required(`spec.versions[${i}].name`));
    if (!v.schema?.openAPIV3Schema) errors.push(required(`spec.versions[${i}].schema.openAPIV3Schema`, 'schemas are required'));
    else if (v.schema.openAPIV3Schema.type !== 'object') {
      errors.push(required(`spec.versions[${i}].schema.openAPIV3Schema.type`, 'must not be empty at the root'));
    } else {
      errors.push(...structuralErrors(v.schema.openAPIV3Schema, `spec.versions[${i}].schema.openAPIV3Schema`));
    }
  });
  names.singular ??= names.kind?.toLowerCase();
  names.listKind ??= names.kind ? `${names.kind}List` : undefined;
  spec.conversion ??= { strategy: 'None' };
  return errors;
}

/** The served type of a stored CRD. */
export function crdType(crd: StoredObject): ResourceType {
  const spec = crd.spec as CrdSpec;
  const names = spec.names ?? {};
  const served = (spec.versions ?? []).filter((v) => v.served !== false && v.name);
  const storage = (spec.versions ?? []).find((v) => v.storage);
  return {
    group: spec.group ?? '',
    versions: served.map((v) => v.name!),
    plural: names.plural ?? '',
    singular: names.singular ?? '',
    kind: names.kind ?? '',
    namespaced: spec.scope === 'Namespaced',
    ...(names.shortNames ? { shortNames: names.shortNames } : {}),
    ...(names.categories ? { categories: names.categories } : {}),
    verbs: ['delete', 'get', 'list', 'patch', 'create', 'update', 'watch'],
    generation: true,
    statusSubresource: Boolean(storage?.subresources?.status),
    nameRule: 'subdomain',
    unconditionalUpdate: false,
    deleteReturnsObject: true,
    schemas: Object.fromEntries(served.map((v) => [v.name!, v.schema?.openAPIV3Schema ?? {}])),
    printerColumns: Object.fromEntries(served.map((v) => [v.name!, v.additionalPrinterColumns ?? []])),
  };
}

function established(crd: StoredObject): boolean {
  const st = crd.status as { conditions?: { type: string; status: string }[]; acceptedNames?: unknown } | undefined;
  const ok = (type: string): boolean => Boolean(st?.conditions?.some((c) => c.type === type && c.status === 'True'));
  return ok('NamesAccepted') && ok('Established') && JSON.stringify(st?.acceptedNames) === JSON.stringify((crd.spec as CrdSpec).names);
}

/**
 * Plays the apiextensions controllers: serves each stored CRD's type and keeps its status Established;
 * forgets the type (and its objects) when the CRD is gone.
 */
export function watchCrds(store: ResourceStore): void {
  store.on('change', (ev: { type: string; resource: string; object: StoredObject }) => {
    if (ev.resource !== CRD_KEY) return;
    const crd = ev.object;
    const crdTypeDef = store.types.get(CRD_KEY)!;
    if (ev.type === 'DELETED') {
      const t = crdType(crd);
      queueMicrotask(() => store.unregister(typeKey(t)));
      return;
    }
    const t = crdType(crd);
    // Re-registering replaces the served type (a changed schema, columns or versions); objects are kept.
    store.register(t);
    if (established(crd)) return;
    queueMicrotask(() => {
      const cur = store.get(crdTypeDef, undefined, crd.metadata.name);
      if (!cur || established(cur)) return;
      const at = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      const spec = cur.spec as CrdSpec;
      store.mutate(crdTypeDef, undefined, crd.metadata.name, (o) => {
        o.status = {
          acceptedNames: structuredClone(spec.names),
          conditions: [
            { type: 'NamesAccepted', status: 'True', lastTransitionTime: at, reason: 'NoConflicts', message: 'no conflicts found' },
            { type: 'Established', status: 'True', lastTransitionTime: at, reason: 'InitialNamesAccepted', message: 'the initial names have been accepted' },
          ],
          storedVersions: (spec.versions ?? []).filter((v) => v.storage).map((v) => v.name),
        };
      });
    });
  });
}
