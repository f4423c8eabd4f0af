import { describe, expect, it } from 'vitest';
import { structuralErrors } from './crd-schema-checks.ts';
import { applyDefaults, applyMerge, prune, validate, type Schema } from './structural-schema.ts';

const schema: Schema = {
  type: 'object',
  properties: {
    spec: {
      type: 'object',
      properties: {
        mode: { type: 'string', default: 'auto' },
        limits: { type: 'object', properties: { cpu: { type: 'string', default: '1' } } },
        port: { 'x-kubernetes-int-or-string': true },
        env: { type: 'object', additionalProperties: { type: 'object', properties: { value: { type: 'string' } } } },
        hosts: { type: 'array', 'x-kubernetes-list-type': 'set', items: { type: 'string' } },
        raw: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
        template: { type: 'object', 'x-kubernetes-embedded-resource': true, properties: { spec: { type: 'object' } } },
        ratio: { type: 'number', minimum: 0, exclusiveMinimum: true },
        count: { type: 'integer', format: 'int32' },
      },
    },
  },
};

describe('structural schema (the fake apiserver’s CRD validation)', () => {
  it('defaults absent fields only where the parent object is present; drops non-nullable nulls first', () => {
    const obj: Record<string, unknown> = { spec: { limits: null, count: null } };
    applyDefaults(obj, schema);
    expect(obj.spec).toEqual({ mode: 'auto' });
    const nulled: Record<string, unknown> = { spec: { mode: null } };
    applyDefaults(nulled, schema);
    expect(nulled.spec).toEqual({ mode: 'auto' });
    const withLimits: Record<string, unknown> = { spec: { mode: 'manual', limits: {} } };
    applyDefaults(withLimits, schema);
    expect(withLimits.spec).toEqual({ mode: 'manual', limits: { cpu: '1' } });
  });

  it('prunes undeclared fields (also inside additionalProperties), keeps preserved ones and embedded metadata', () => {
    const obj = {
      apiVersion: 'x/v1',
      kind: 'X',
      metadata: { name: 'n' },
      top: 1,
      spec: { env: { A: { value: 'a', junk: 1 } }, raw: { any: { thing: 1 } }, template: { metadata: { labels: { a: 'b' } }, spec: {}, extra: 1 } },
    };
    expect(prune(obj, schema).sort()).toEqual(['spec.env.A.junk', 'spec.template.extra', 'top']);
    expect(obj).toEqual({
      apiVersion: 'x/v1',
      kind: 'X',
      metadata: { name: 'n' },
      spec: { env: { A: { value: 'a' } }, raw: { any: { thing: 1 } }, template: { metadata: { labels: { a: 'b' } }, spec: {} } },
    });
  });

  it('checks int-or-string, set lists, exclusive bounds, int32 and a null list item', () => {
    const errors = validate(
      { spec: { port: true, hosts: ['a', 'a'], ratio: 0, count: 2 ** 31, mode: 'x' }, list: [null] },
      {
        ...schema,
        properties: { ...schema.properties, list: { type: 'array', items: { type: 'string' } } },
      },
    );
    expect(errors).toEqual([
      { reason: 'FieldValueInvalid', field: 'spec.port', message: 'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"' },
      { reason: 'FieldValueDuplicate', field: 'spec.hosts[1]', message: 'Duplicate value: "a"' },
      { reason: 'FieldValueInvalid', field: 'spec.ratio', message: 'Invalid value: 0: spec.ratio in body should be greater than 0' },
      { reason: 'FieldValueInvalid', field: 'spec.count', message: 'Invalid value: 2147483648: spec.count in body must be of type int32: "2147483648"' },
      { reason: 'FieldValueInvalid', field: 'list[0]', message: 'Invalid value: "null": list[0] in body must be of type string: "null"' },
    ]);
    expect(validate({ spec: { port: 'http', hosts: ['a', 'b'], ratio: 0.5, count: 3 } }, schema)).toEqual([]);
  });

  it('merges an apply into list-maps by key and replaces other lists', () => {
    const listMap: Schema = {
      type: 'object',
      properties: {
        items: { type: 'array', 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['name'], items: { type: 'object' } },
        tags: { type: 'array', items: { type: 'string' } },
      },
    };
    const cur = { items: [{ name: 'a', v: 1 }], tags: ['x'] };
    expect(applyMerge(cur, { items: [{ name: 'a', w: 2 }, { name: 'b' }], tags: ['y'] }, listMap)).toEqual({
      items: [{ name: 'a', v: 1, w: 2 }, { name: 'b' }],
      tags: ['y'],
    });
  });

  it('validates anyOf, oneOf and not as value validations', () => {
    const s: Schema = {
      type: 'object',
      properties: {
        port: { type: 'integer', anyOf: [{ minimum: 1000 }, { enum: [80, 443] }] },
        mode: { type: 'string', oneOf: [{ pattern: '^a' }, { pattern: 'b$' }] },
      },
      not: { required: ['forbidden'] },
    };
    expect(validate({ port: 443, mode: 'ax' }, s)).toEqual([]);
    expect(validate({ port: 22, mode: 'ab', forbidden: 1 }, s).map((e) => e.message)).toEqual([
      'Invalid value: map[string]interface {}{"port":22, "mode":"ab", "forbidden":1}: <root> in body should not validate the schema (not)',
      'Invalid value: 22: port in body must validate at least one schema (anyOf)',
      'Invalid value: "ab": mode in body must validate one and only one schema (oneOf)',
    ]);
  });

  it('finds what makes a CRD schema non-structural', () => {
    const bad: Schema = {
      type: 'object',
      properties: {
        spec: {
          type: 'object',
          additionalProperties: false,
          properties: { name: {}, ref: { $ref: '#/x' }, pick: { type: 'string', anyOf: [{ type: 'string' }] } },
        },
        status: { 'x-kubernetes-preserve-unknown-fields': true },
      },
    };
    expect(structuralErrors(bad, 'spec.versions[0].schema.openAPIV3Schema').map((e) => `${e.field}: ${e.message}`)).toEqual([
      'spec.versions[0].schema.openAPIV3Schema.properties[spec].additionalProperties: Forbidden: additionalProperties cannot be set to false',
      'spec.versions[0].schema.openAPIV3Schema.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive',
      'spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[name].type: Required value: must not be empty for specified object fields',
      'spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[ref].$ref: Forbidden: $ref is forbidden',
      'spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[ref].type: Required value: must not be empty for specified object fields',
      'spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[pick].anyOf[0].type: Forbidden: must be empty to be structural',
    ]);
  });
});
