import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, test } from 'vitest';
import { CRD_FILES, providerHealthCrd, proxyCrd, proxyPoolCrd } from '../../src/crds/definitions.ts';
import { structuralSchema, UnstructuralSchemaError } from '../../src/crds/openapi.ts';
import { renderCrdFile } from '../../src/crds/render.ts';
import { z } from 'zod';

const root = join(import.meta.dirname, '..', '..');

describe('generated CRDs', () => {
  test.each(CRD_FILES.map((f) => [f.path, f] as const))('%s is what the generator writes', (_path, file) => {
    const committed = readFileSync(join(root, file.path), 'utf8');
    expect(committed, `${file.path} is out of date with the zod schemas: run \`npm run crds\` and commit the result`).toBe(renderCrdFile(file.build()));
  });

  test('ProviderHealth: cluster-scoped, ph, status subresource, targets a list-map keyed by name, messages at most 1024', () => {
    const crd = parse(readFileSync(join(root, CRD_FILES[0]?.path ?? ''), 'utf8'));
    expect(crd).toEqual(providerHealthCrd());
    const version = crd.spec.versions[0];
    expect(crd.spec.scope).toBe('Cluster');
    expect(crd.spec.names.shortNames).toEqual(['ph']);
    expect(version.subresources).toEqual({ status: {} });
    const targets = version.schema.openAPIV3Schema.properties.status.properties.targets;
    expect(targets['x-kubernetes-list-type']).toBe('map');
    expect(targets['x-kubernetes-list-map-keys']).toEqual(['name']);
    expect(targets.items.properties.message.maxLength).toBe(1024);
    expect(targets.items.properties.lastTransitionTime.format).toBe('date-time');
    expect(version.additionalPrinterColumns.filter((c: { priority?: number }) => !c.priority).map((c: { name: string }) => c.name.toUpperCase())).toEqual([
      'READY',
      'TARGETS',
      'LAST CHECK',
      'AGE',
    ]);
  });

  test('Proxy: namespaced, px, status subresource, columns PROVIDER PHASE AGE, conditions keyed by type', () => {
    const crd = proxyCrd();
    const version = (crd.spec as { versions: Record<string, never>[] }).versions[0] as unknown as {
      subresources: unknown;
      additionalPrinterColumns: { name: string; priority?: number }[];
      schema: { openAPIV3Schema: { properties: { status: { properties: Record<string, Record<string, unknown>> } } } };
    };
    expect((crd.spec as { scope: string }).scope).toBe('Namespaced');
    expect(version.subresources).toEqual({ status: {} });
    expect(version.additionalPrinterColumns.filter((c) => !c.priority).map((c) => c.name.toUpperCase())).toEqual(['PROVIDER', 'PHASE', 'AGE']);
    const status = version.schema.openAPIV3Schema.properties.status.properties;
    expect(status.conditions?.['x-kubernetes-list-map-keys']).toEqual(['type']);
    expect(status.credentialsSecretRef).toBeDefined();
  });

  test('ProxyPool: namespaced, pxp, status subresource, columns REPLICAS DESIRED READY ROTATING FAILED AGE, maxAge’s syntax, conditions keyed by type', () => {
    const crd = proxyPoolCrd();
    const spec = crd.spec as { scope: string; names: { shortNames: string[] }; versions: Record<string, never>[] };
    const version = spec.versions[0] as unknown as {
      subresources: unknown;
      additionalPrinterColumns: { name: string; priority?: number }[];
      schema: {
        openAPIV3Schema: {
          properties: { spec: { properties: Record<string, Record<string, unknown>> }; status: { properties: Record<string, Record<string, unknown>> } };
        };
      };
    };
    expect(spec.scope).toBe('Namespaced');
    expect(spec.names.shortNames).toEqual(['pxp']);
    expect(version.subresources).toEqual({ status: {} });
    expect(version.additionalPrinterColumns.filter((c) => !c.priority).map((c) => c.name.toUpperCase())).toEqual([
      'REPLICAS',
      'DESIRED',
      'READY',
      'ROTATING',
      'FAILED',
      'AGE',
    ]);
    const props = version.schema.openAPIV3Schema.properties;
    const maxAge = new RegExp(String(props.spec.properties.maxAge?.pattern));
    expect(['30m', '24h', '1h30m', '1.5h', '10s'].filter((t) => !maxAge.test(t))).toEqual([]);
    expect(['', '0', '-1h', 'soon', '30', '1d'].filter((t) => maxAge.test(t))).toEqual([]);
    expect(props.spec.properties.maxSurge?.default).toBe(1);
    expect(props.status.properties.conditions?.['x-kubernetes-list-map-keys']).toEqual(['type']);
  });

  test('a schema with no structural form is refused, naming where', () => {
    expect(() => structuralSchema(z.object({ a: z.object({ b: z.union([z.string(), z.number()]) }) }))).toThrow(UnstructuralSchemaError);
    expect(() => structuralSchema(z.object({ a: z.object({ b: z.union([z.string(), z.number()]) }) }))).toThrow(/^a\.b: /);
  });
});
