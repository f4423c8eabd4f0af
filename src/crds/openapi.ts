import { z } from 'zod';

/**
 * Turns a zod schema into a structural OpenAPI v3 schema, as a CustomResourceDefinition's
 * `openAPIV3Schema` needs it: zod 4's JSON Schema output (OpenAPI 3.0 flavour), then a pass that
 * removes what a structural schema forbids and adds the `x-kubernetes-*` markers that the zod
 * schemas carry as metadata (`.meta({ listMapKeys: ['name'] })`).
 *
 * A construct that has no structural form (a `$ref`, a union) throws: the CRD must never say
 * less than the schema silently.
 */

export type OpenApiSchema = { [key: string]: unknown };

/** Keys a structural schema may carry that the conversion keeps as they are. */
const KEPT = new Set([
  'type',
  'format',
  'pattern',
  'enum',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'multipleOf',
  'nullable',
  'default',
  'description',
  'required',
]);

/** Keys zod writes that a CRD does without (a CRD prunes unknown fields instead of rejecting them). */
const DROPPED = new Set(['$schema', 'additionalProperties', 'id', 'title']);

export class UnstructuralSchemaError extends Error {
  constructor(path: string, what: string) {
    super(`${path || '<root>'}: ${what} has no structural OpenAPI form; express it with a plainer zod schema or check it in the API only`);
  }
}

function convert(node: unknown, path: string): OpenApiSchema {
  if (node === null || typeof node !== 'object' || Array.isArray(node)) throw new UnstructuralSchemaError(path, 'a schema that is not an object');
  const source = node as Record<string, unknown>;
  // A union of a string and an integer marked `.meta({ intOrString: true })` (a traffic quantity): Kubernetes' own int-or-string.
  if (source.intOrString === true) {
    return { 'x-kubernetes-int-or-string': true, ...(typeof source.description === 'string' ? { description: source.description } : {}) };
  }
  const out: OpenApiSchema = {};
  for (const [key, value] of Object.entries(source)) {
    if (KEPT.has(key)) {
      out[key] = value;
    } else if (key === 'properties') {
      const props: Record<string, OpenApiSchema> = {};
      for (const [name, child] of Object.entries(value as Record<string, unknown>)) props[name] = convert(child, path ? `${path}.${name}` : name);
      out.properties = props;
    } else if (key === 'items') {
      out.items = convert(value, `${path}[]`);
    } else if (key === 'additionalProperties') {
      // A map (z.record): its values' schema. `false` (a strict object) is dropped: CRDs prune.
      if (typeof value === 'object' && value !== null) out.additionalProperties = convert(value, `${path}.*`);
    } else if (key === 'listMapKeys') {
      out['x-kubernetes-list-type'] = 'map';
      out['x-kubernetes-list-map-keys'] = value;
    } else if (key === 'preserveUnknownFields') {
      out['x-kubernetes-preserve-unknown-fields'] = value;
    } else if (DROPPED.has(key)) {
      continue;
    } else {
      throw new UnstructuralSchemaError(path, `"${key}"`);
    }
  }
  // zod bounds every integer by the safe-integer range; Kubernetes integers are int64 already.
  if (out.type === 'integer' && out.maximum === Number.MAX_SAFE_INTEGER) delete out.maximum;
  if (out.type === 'integer' && out.minimum === Number.MIN_SAFE_INTEGER) delete out.minimum;
  // zod spells ISO date-times as a long pattern too; `format: date-time` is Kubernetes' own check (RFC 3339).
  if (out.format === 'date-time') delete out.pattern;
  if (typeof out.type !== 'string') throw new UnstructuralSchemaError(path, 'a schema without a single type');
  if (out.type === 'object' && out.properties === undefined && out.additionalProperties === undefined && out['x-kubernetes-preserve-unknown-fields'] !== true) {
    throw new UnstructuralSchemaError(path, 'an object without properties');
  }
  return out;
}

/** The structural OpenAPI v3 schema of `schema` as users write it (`io: 'input'`). */
export function structuralSchema(schema: z.ZodType): OpenApiSchema {
  const json = z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', unrepresentable: 'throw' });
  return convert(json, '');
}
