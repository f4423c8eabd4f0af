/**
 * The generated CRDs accept every valid and reject every invalid fixture the API's validation is held
 * to: each fixture is created as a custom resource in the fake kube-apiserver (the CRD registered from
 * deploy/kubernetes/crds, its structural schema enforced) with client-node, as `kubectl apply` would
 * (fieldValidation=Strict): 201 for a valid one, 400/422 for an invalid one.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiException, CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CRD_FILES } from '../../src/crds/definitions.ts';
import { providerHealthSchema } from '../../src/health/provider-health.ts';
import { poolDocumentSchema } from '../../src/model/pool-resource.ts';
import { safeParseWorded } from '../../src/schema/zod-helpers.ts';
import { InvalidProxyDocumentsError, validateProxyDocuments } from '../../src/proxies/parse-documents.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { INVALID_PROXY_DOCUMENTS, VALID_PROXY_DOCUMENTS } from '../support/proxy-fixtures.ts';
import { INVALID_POOL_DOCUMENTS, VALID_POOL_DOCUMENTS } from '../support/pool-fixtures.ts';
import { INVALID_PROVIDER_HEALTH, VALID_PROVIDER_HEALTH } from '../support/provider-health-fixtures.ts';

const root = join(import.meta.dirname, '..', '..');
const GROUP = { group: 'egress-proxies.io', version: 'v1alpha1' };

let fake: FakeKubeApiserver;
let crs: CustomObjectsApi;
let count = 0;

beforeAll(async () => {
  fake = await startFakeKubeApiserver();
  for (const file of CRD_FILES) fake.registerCrd(parse(readFileSync(join(root, file.path), 'utf8')) as object);
  crs = fake.kubeConfig().makeApiClient(CustomObjectsApi);
});
afterAll(() => fake.close());

/** The HTTP status the API server answers a create of `body` with. */
async function createStatus(call: () => Promise<unknown>): Promise<number> {
  try {
    await call();
    return 201;
  } catch (err) {
    if (err instanceof ApiException) return Number(err.code);
    throw err;
  }
}

function apiErrors(document: unknown): string[] {
  try {
    validateProxyDocuments([document]);
    return [];
  } catch (err) {
    if (err instanceof InvalidProxyDocumentsError) return err.errors;
    throw err;
  }
}

function createProxy(document: Record<string, unknown>): Promise<number> {
  const body = { ...document, apiVersion: 'egress-proxies.io/v1alpha1', kind: 'Proxy' };
  return createStatus(() => crs.createNamespacedCustomObject({ ...GROUP, plural: 'proxies', namespace: 'default', body, fieldValidation: 'Strict' }));
}

describe('Proxy CRD against the API’s fixtures', () => {
  test.each(VALID_PROXY_DOCUMENTS.map((f) => [f.what, f] as const))('valid: %s — the API and the CRD accept it', async (_what, fixture) => {
    expect(apiErrors(fixture.document)).toEqual([]);
    expect(await createProxy(fixture.document)).toBe(201);
  });

  test.each(INVALID_PROXY_DOCUMENTS.map((f) => [f.what, f] as const))('invalid: %s — the API rejects it, and the CRD as documented', async (_what, fixture) => {
    expect(apiErrors(fixture.document)).toEqual(fixture.apiErrors);
    const status = await createProxy(fixture.document);
    if (fixture.crd === 'rejects') expect([400, 422]).toContain(status);
    else expect(status).toBe(201);
  });
});

function poolErrors(document: unknown): string[] {
  const result = safeParseWorded(poolDocumentSchema, document);
  return result.ok ? [] : result.lines;
}

function createPool(document: Record<string, unknown>): Promise<number> {
  const body = { ...document, apiVersion: 'egress-proxies.io/v1alpha1', kind: 'ProxyPool' };
  return createStatus(() => crs.createNamespacedCustomObject({ ...GROUP, plural: 'proxypools', namespace: 'default', body, fieldValidation: 'Strict' }));
}

describe('ProxyPool CRD against the pool fixtures', () => {
  test.each(VALID_POOL_DOCUMENTS.map((f) => [f.what, f] as const))('valid: %s — the API and the CRD accept it', async (_what, fixture) => {
    expect(poolErrors(fixture.document)).toEqual([]);
    expect(await createPool(fixture.document)).toBe(201);
  });

  test.each(INVALID_POOL_DOCUMENTS.map((f) => [f.what, f] as const))('invalid: %s — the API rejects it, and the CRD as documented', async (_what, fixture) => {
    expect(poolErrors(fixture.document)).toEqual(fixture.apiErrors);
    const status = await createPool(fixture.document);
    if (fixture.crd === 'rejects') expect([400, 422]).toContain(status);
    else expect(status).toBe(201);
  });
});

describe('ProviderHealth CRD against the status fixtures', () => {
  async function writeStatus(status: unknown): Promise<number> {
    const name = `ph-${++count}`;
    const created = (await crs.createClusterCustomObject({
      ...GROUP,
      plural: 'providerhealths',
      body: { apiVersion: 'egress-proxies.io/v1alpha1', kind: 'ProviderHealth', metadata: { name } },
    })) as { metadata: Record<string, unknown> };
    return createStatus(() =>
      crs.replaceClusterCustomObjectStatus({
        ...GROUP,
        plural: 'providerhealths',
        name,
        body: { apiVersion: 'egress-proxies.io/v1alpha1', kind: 'ProviderHealth', metadata: created.metadata, status },
        fieldValidation: 'Strict',
      }),
    );
  }

  test.each(VALID_PROVIDER_HEALTH.map((f) => [f.what, f] as const))('valid: %s — the schema and the CRD accept it', async (_what, fixture) => {
    expect(providerHealthSchema.safeParse(fixture.health).success).toBe(true);
    expect(await writeStatus(fixture.health.status)).toBe(201);
  });

  test.each(INVALID_PROVIDER_HEALTH.map((f) => [f.what, f] as const))('invalid: %s — rejected as documented', async (_what, fixture) => {
    expect(providerHealthSchema.safeParse(fixture.health).success).toBe(fixture.zod === 'accepts');
    const status = await writeStatus(fixture.health.status);
    if (fixture.crd === 'rejects') expect([400, 422]).toContain(status);
    else expect(status).toBe(201);
  });
});
