/**
 * The structural-schema rules a CRD's `openAPIV3Schema` must follow, as the real apiextensions server
 * refuses them (422 on the CRD): a non-empty `type` for every specified field and array item (unless
 * `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`), no `additionalProperties: false`,
 * `properties` and `additionalProperties` not both, none of the keywords CRDs forbid (`$ref`, `const`,
 * `definitions`, `patternProperties`, `uniqueItems: true`, …), and no `type`/`default`/`nullable`/
 * `additionalProperties` inside `anyOf`/`oneOf`/`allOf`/`not` (value validations only). A subset of the
 * real checks: enough to catch what a schema generator typically gets wrong.
 */
import type { FieldError, Schema } from './structural-schema.ts';

const FORBIDDEN = ['$ref', '$schema', 'id', 'definitions', 'const', 'patternProperties', 'dependencies', 'additionalItems'] as const;
const NOT_IN_JUNCTORS = [
  'type',
  'default',
  'nullable',
  'additionalProperties',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-embedded-resource',
] as const;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Field errors of `schema` found under `path` (e.g. `spec.versions[0].schema.openAPIV3Schema`). */
export function structuralErrors(schema: Schema, path: string, typeRequired = true, inJunctor = false): FieldError[] {
  const errors: FieldError[] = [];
  const forbidden = (field: string, detail: string): void => {
    errors.push({ reason: 'FieldValueForbidden', field: `${path}.${field}`, message: `Forbidden: ${detail}` });
  };
  for (const k of FORBIDDEN) if (schema[k] !== undefined) forbidden(k, `${k} is forbidden`);
  if (schema.uniqueItems === true) forbidden('uniqueItems', 'uniqueItems cannot be set to true since the runtime complexity becomes quadratic');
  if (schema.additionalProperties === false) forbidden('additionalProperties', 'additionalProperties cannot be set to false');
  if (schema.properties && schema.additionalProperties !== undefined)
    forbidden('additionalProperties', 'additionalProperties and properties are mutual exclusive');
  if (inJunctor) {
    for (const k of NOT_IN_JUNCTORS) if (schema[k] !== undefined) forbidden(k, 'must be empty to be structural');
  } else if (typeRequired && !schema.type && !schema['x-kubernetes-int-or-string'] && !schema['x-kubernetes-preserve-unknown-fields']) {
    errors.push({ reason: 'FieldValueRequired', field: `${path}.type`, message: 'Required value: must not be empty for specified object fields' });
  }
  for (const [k, sub] of Object.entries(schema.properties ?? {})) errors.push(...structuralErrors(sub, `${path}.properties[${k}]`, !inJunctor, inJunctor));
  if (isObject(schema.additionalProperties))
    errors.push(...structuralErrors(schema.additionalProperties, `${path}.additionalProperties`, !inJunctor, inJunctor));
  if (schema.items) {
    if (Array.isArray(schema.items)) forbidden('items', 'items must be a schema object and not an array');
    else errors.push(...structuralErrors(schema.items, `${path}.items`, !inJunctor, inJunctor));
  }
  for (const junctor of ['anyOf', 'oneOf', 'allOf'] as const) {
    schema[junctor]?.forEach((s, i) => errors.push(...structuralErrors(s, `${path}.${junctor}[${i}]`, false, true)));
  }
  if (schema.not) errors.push(...structuralErrors(schema.not, `${path}.not`, false, true));
  return errors;
}
