/**
 * A CRD's structural `openAPIV3Schema` as the apiserver applies it to a custom resource, in its order:
 * defaults (`default`, where the parent object is present; non-nullable nulls dropped), pruning of fields the schema does not declare
 * (unless `x-kubernetes-preserve-unknown-fields`; `apiVersion`, `kind` and `metadata` at the root are kept),
 * then validation. Errors are field errors worded as the real server's (kube-openapi messages wrapped in
 * apimachinery field errors): `Required value`, `Unsupported value: "x": supported values: "a", "b"`,
 * `Invalid value: "string": spec.n in body must be of type integer: "string"`, `Too long: may not be more
 * than 8 bytes`, `Too many: 3: must have at most 2 items`, `Duplicate value: map[string]interface {}{"name":"a"}`.
 * Covered keywords: type, properties, required, enum, maxLength, minLength, pattern, format (date-time, int32,
 * int64, byte), minimum/maximum (+ exclusive), maxItems/minItems, items, additionalProperties (a schema),
 * nullable, anyOf/oneOf/allOf/not (value validations), x-kubernetes-list-type (map with
 * x-kubernetes-list-map-keys, set), x-kubernetes-int-or-string.
 */

export interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  enum?: unknown[];
  maxLength?: number;
  minLength?: number;
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  maxItems?: number;
  minItems?: number;
  maxProperties?: number;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  nullable?: boolean;
  default?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  not?: Schema;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  [k: string]: unknown;
}

export interface FieldError {
  reason:
    | 'FieldValueRequired'
    | 'FieldValueInvalid'
    | 'FieldValueNotSupported'
    | 'FieldValueTooLong'
    | 'FieldValueTooMany'
    | 'FieldValueDuplicate'
    | 'FieldValueForbidden';
  field: string;
  message: string;
}

type Json = unknown;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Go's `%#v`-ish rendering of a value for `Invalid value: …` (strings quoted, numbers bare). */
export function goValue(v: Json): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[]interface {}{${v.map(goValue).join(', ')}}`;
  return `map[string]interface {}{${Object.entries(v as Record<string, unknown>)
    .map(([k, x]) => `${JSON.stringify(k)}:${goValue(x)}`)
    .join(', ')}}`;
}

function typeName(v: Json): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/**
 * Fills `default`s into `value` (in place) where a property is absent and its parent object is present. A
 * `null` in a property that is not `nullable` is dropped first (then defaulted if it has a default), as the
 * real server does since 1.20.
 */
export function applyDefaults(value: Json, schema: Schema | undefined): void {
  if (!schema) return;
  if (isObject(value)) {
    for (const [k, s] of Object.entries(schema.properties ?? {})) {
      if (value[k] === null && !s.nullable) delete value[k];
      if (value[k] === undefined && s.default !== undefined) value[k] = structuredClone(s.default);
      applyDefaults(value[k], s);
    }
    if (isObject(schema.additionalProperties))
      for (const k of Object.keys(value)) if (!schema.properties?.[k]) applyDefaults(value[k], schema.additionalProperties);
  } else if (Array.isArray(value)) {
    for (const item of value) applyDefaults(item, schema.items);
  }
}

/** Removes fields the schema does not declare (in place); returns the pruned paths (for `fieldValidation=Strict`). */
export function prune(value: Json, schema: Schema | undefined, path = '', root = true): string[] {
  if (!schema || (schema['x-kubernetes-preserve-unknown-fields'] === true && !schema.properties)) return [];
  const pruned: string[] = [];
  if (isObject(value)) {
    const declared = schema.properties ?? {};
    for (const k of Object.keys(value)) {
      const here = path ? `${path}.${k}` : k;
      // The root and embedded resources keep apiVersion, kind and metadata.
      if ((root || schema['x-kubernetes-embedded-resource'] === true) && (k === 'apiVersion' || k === 'kind' || k === 'metadata')) continue;
      if (declared[k]) pruned.push(...prune(value[k], declared[k], here, false));
      else if (isObject(schema.additionalProperties)) pruned.push(...prune(value[k], schema.additionalProperties, here, false));
      else if (schema['x-kubernetes-preserve-unknown-fields'] !== true && schema.additionalProperties !== true) {
        delete value[k];
        pruned.push(here);
      }
    }
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => pruned.push(...prune(item, schema.items, `${path}[${i}]`, false)));
  }
  return pruned;
}

const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function formatOk(format: string, v: Json): boolean {
  if (typeof v !== 'string') return true;
  switch (format) {
    case 'date-time':
      return DATE_TIME.test(v) && !Number.isNaN(Date.parse(v.replace(' ', 'T')));
    case 'date':
      return /^\d{4}-\d{2}-\d{2}$/.test(v);
    case 'byte':
      return /^[A-Za-z0-9+/]*={0,2}$/.test(v) && v.length % 4 === 0;
    case 'uuid':
      return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v);
    default:
      return true;
  }
}

/** Validates `value` against `schema`; `path` is the field path of `value` (`spec`, `status.targets[0]`). */
export function validate(value: Json, schema: Schema | undefined, path = ''): FieldError[] {
  if (!schema) return [];
  const errors: FieldError[] = [];
  const at = path || '<root>';
  const invalid = (v: Json, detail: string): void => {
    errors.push({ reason: 'FieldValueInvalid', field: at, message: `Invalid value: ${goValue(v)}: ${detail}` });
  };
  if (value === null) {
    if (!schema.nullable && schema.type) invalid('null', `${at} in body must be of type ${schema.type}: "null"`);
    return errors;
  }
  if (schema['x-kubernetes-int-or-string']) {
    if (typeof value !== 'string' && !(typeof value === 'number' && Number.isInteger(value))) {
      invalid(typeName(value), `${at} in body must be of type integer,string: ${JSON.stringify(typeName(value))}`);
      return errors;
    }
  } else if (schema.type) {
    const actual = typeName(value);
    const ok = actual === schema.type || (schema.type === 'number' && actual === 'integer');
    if (!ok) {
      invalid(actual, `${at} in body must be of type ${schema.type}: ${JSON.stringify(actual)}`);
      return errors;
    }
  }
  const passes = (s: Schema): boolean => validate(value, s, path).length === 0;
  if (schema.anyOf && !schema.anyOf.some(passes)) invalid(value, `${at} in body must validate at least one schema (anyOf)`);
  if (schema.oneOf && schema.oneOf.filter(passes).length !== 1) invalid(value, `${at} in body must validate one and only one schema (oneOf)`);
  for (const s of schema.allOf ?? []) errors.push(...validate(value, s, path));
  if (schema.not && passes(schema.not)) invalid(value, `${at} in body should not validate the schema (not)`);
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    errors.push({
      reason: 'FieldValueNotSupported',
      field: at,
      message: `Unsupported value: ${goValue(value)}: supported values: ${schema.enum.map((e) => goValue(e)).join(', ')}`,
    });
  }
  if (typeof value === 'string') {
    const len = [...value].length;
    if (schema.maxLength !== undefined && len > schema.maxLength) {
      errors.push({ reason: 'FieldValueTooLong', field: at, message: `Too long: may not be more than ${schema.maxLength} bytes` });
    }
    if (schema.minLength !== undefined && len < schema.minLength) invalid(value, `${at} in body should be at least ${schema.minLength} chars long`);
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value)) invalid(value, `${at} in body should match '${schema.pattern}'`);
    if (schema.format && !formatOk(schema.format, value)) invalid(value, `${at} in body must be of type ${schema.format}: ${JSON.stringify(value)}`);
  }
  if (typeof value === 'number') {
    if (schema.format === 'int32' && (value > 2147483647 || value < -2147483648)) invalid(value, `${at} in body must be of type int32: "${value}"`);
    if (schema.maximum !== undefined) {
      if (schema.exclusiveMaximum ? value >= schema.maximum : value > schema.maximum) {
        invalid(value, `${at} in body should be less than ${schema.exclusiveMaximum ? '' : 'or equal to '}${schema.maximum}`);
      }
    }
    if (schema.minimum !== undefined) {
      if (schema.exclusiveMinimum ? value <= schema.minimum : value < schema.minimum) {
        invalid(value, `${at} in body should be greater than ${schema.exclusiveMinimum ? '' : 'or equal to '}${schema.minimum}`);
      }
    }
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems) {
      errors.push({ reason: 'FieldValueTooMany', field: at, message: `Too many: ${value.length}: must have at most ${schema.maxItems} items` });
    }
    if (schema.minItems !== undefined && value.length < schema.minItems) invalid(value, `${at} in body should have at least ${schema.minItems} items`);
    value.forEach((item, i) => errors.push(...validate(item, schema.items, `${path}[${i}]`)));
    errors.push(...listTypeErrors(value, schema, path));
  }
  if (isObject(value)) {
    for (const r of schema.required ?? []) {
      if (value[r] === undefined) errors.push({ reason: 'FieldValueRequired', field: path ? `${path}.${r}` : r, message: 'Required value' });
    }
    if (schema.maxProperties !== undefined && Object.keys(value).length > schema.maxProperties) {
      errors.push({
        reason: 'FieldValueTooMany',
        field: at,
        message: `Too many: ${Object.keys(value).length}: must have at most ${schema.maxProperties} items`,
      });
    }
    for (const [k, v] of Object.entries(value)) {
      const sub = schema.properties?.[k] ?? (isObject(schema.additionalProperties) ? schema.additionalProperties : undefined);
      if (sub) errors.push(...validate(v, sub, path ? `${path}.${k}` : k));
    }
  }
  return errors;
}

/** `x-kubernetes-list-type: map` (unique map keys; key fields required) and `set` (unique items). */
function listTypeErrors(items: Json[], schema: Schema, path: string): FieldError[] {
  const errors: FieldError[] = [];
  const type = schema['x-kubernetes-list-type'];
  if (type === 'map') {
    const keys = schema['x-kubernetes-list-map-keys'] ?? [];
    const seen = new Set<string>();
    items.forEach((item, i) => {
      if (!isObject(item)) return;
      const keyObj = Object.fromEntries(keys.filter((k) => item[k] !== undefined).map((k) => [k, item[k]]));
      const id = JSON.stringify(keys.map((k) => item[k] ?? null));
      if (seen.has(id)) errors.push({ reason: 'FieldValueDuplicate', field: `${path}[${i}]`, message: `Duplicate value: ${goValue(keyObj)}` });
      seen.add(id);
    });
  } else if (type === 'set') {
    const seen = new Set<string>();
    items.forEach((item, i) => {
      const id = JSON.stringify(item);
      if (seen.has(id)) errors.push({ reason: 'FieldValueDuplicate', field: `${path}[${i}]`, message: `Duplicate value: ${goValue(item)}` });
      seen.add(id);
    });
  }
  return errors;
}

/**
 * Server-side apply's merge for a custom resource (simplified: no managedFields): objects merge recursively,
 * lists with `x-kubernetes-list-type: map` merge their entries by the map keys, other lists are replaced.
 */
export function applyMerge(target: Json, patch: Json, schema: Schema | undefined): Json {
  if (isObject(patch)) {
    const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
    for (const [k, v] of Object.entries(patch)) {
      const sub = schema?.properties?.[k] ?? (isObject(schema?.additionalProperties) ? schema.additionalProperties : undefined);
      out[k] = v === null ? null : applyMerge(out[k], v, sub);
    }
    return out;
  }
  if (Array.isArray(patch) && Array.isArray(target) && schema?.['x-kubernetes-list-type'] === 'map') {
    const keys = schema['x-kubernetes-list-map-keys'] ?? [];
    const id = (item: unknown): string => JSON.stringify(keys.map((k) => (isObject(item) ? (item[k] ?? null) : null)));
    const out = [...target];
    for (const item of patch) {
      const i = out.findIndex((t) => id(t) === id(item));
      if (i >= 0) out[i] = applyMerge(out[i], item, schema.items);
      else out.push(structuredClone(item));
    }
    return out;
  }
  return structuredClone(patch);
}
