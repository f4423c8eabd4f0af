/**
 * The fake's object-metadata rules (object-meta-rules.ts) through client-node, as a real apiserver
 * answers them: 422 Invalid with the field, the value and the rule in the message and in
 * `details.causes`, for label keys and values on every kind (custom resources, Pods, Secrets), on
 * create and on update, and a CRD's `metadata.name` restrictions on custom resources. Also the
 * fleet label a real install writes: what `fleetOf('{egress}:')` gave before (`egress-`) is refused,
 * what it gives now is accepted.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiException, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CRD_FILES } from '../../../src/crds/definitions.ts';
import { silentLogger } from '../../../src/logging.ts';
import { createKubernetesLifecycle } from '../../../src/providers/kubernetes/lifecycle.ts';
import { fleetOf } from '../../../src/proxies/instance-name.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';
import { labelKeyProblems, labelValueProblems } from './object-meta-rules.ts';

const root = join(import.meta.dirname, '..', '..', '..');
const GROUP = { group: 'egress-proxies.io', version: 'v1alpha1' };

let kube: FakeKubeApiserver;
let crs: CustomObjectsApi;
let core: CoreV1Api;

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  for (const file of CRD_FILES) kube.registerCrd(parse(readFileSync(join(root, file.path), 'utf8')) as object);
  crs = kube.kubeConfig().makeApiClient(CustomObjectsApi);
  core = kube.kubeConfig().makeApiClient(CoreV1Api);
});
afterEach(async () => {
  await kube.close();
});

interface StatusBody {
  code: number;
  reason: string;
  message: string;
  details: { name: string; kind: string; causes: { reason: string; field: string; message: string }[] };
}

async function refusal(call: () => Promise<unknown>): Promise<StatusBody> {
  const err = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiException);
  const body = JSON.parse(String((err as ApiException<string>).body)) as StatusBody;
  expect((err as ApiException<string>).code).toBe(422);
  return body;
}

const proxy = (metadata: Record<string, unknown>) => ({ apiVersion: 'egress-proxies.io/v1alpha1', kind: 'Proxy', metadata, spec: { provider: 'local' } });
const createProxy = (metadata: Record<string, unknown>) =>
  crs.createNamespacedCustomObject({ ...GROUP, plural: 'proxies', namespace: 'default', body: proxy(metadata) });

describe('label keys and values', () => {
  it('the key and value rules: 63-character name part, alphanumeric ends, a DNS subdomain prefix', () => {
    for (const good of ['team', 'a', 'A.b_c-9', 'example.com/team', 'egress-proxies/fleet', `${'k'.repeat(63)}`, `${'p'.repeat(253)}/x`]) {
      expect(labelKeyProblems(good), good).toEqual([]);
    }
    expect(labelKeyProblems('-bad')).toEqual([expect.stringMatching(/^name part must consist of alphanumeric characters/)]);
    expect(labelKeyProblems('bad.')).toHaveLength(1);
    expect(labelKeyProblems('k'.repeat(64))).toEqual(['name part must be no more than 63 bytes']);
    expect(labelKeyProblems('Example.com/x')).toEqual([expect.stringMatching(/^prefix part a lowercase RFC 1123 subdomain/)]);
    expect(labelKeyProblems('/x')).toEqual(['prefix part must be non-empty']);
    expect(labelKeyProblems('a/')).toEqual(['name part must be non-empty']);
    expect(labelKeyProblems('a/b/c')).toEqual([expect.stringMatching(/^a qualified name must consist of/)]);
    for (const good of ['', 'x', 'MyValue', 'my_value', '12345', 'a.b-c', 'v'.repeat(63)]) expect(labelValueProblems(good), good).toEqual([]);
    expect(labelValueProblems('egress-')).toEqual([expect.stringMatching(/^a valid label must be an empty string or consist of alphanumeric/)]);
    expect(labelValueProblems('-x')).toHaveLength(1);
    expect(labelValueProblems('a b')).toHaveLength(1);
    expect(labelValueProblems('v'.repeat(64))).toEqual(['must be no more than 63 bytes']);
  });

  it('a custom resource with a bad key and a long value: 422 naming both, nothing stored', async () => {
    const body = await refusal(() => createProxy({ name: 'a', labels: { '-bad': 'x', team: 'v'.repeat(70) } }));
    expect(body).toMatchObject({ code: 422, reason: 'Invalid', details: { name: 'a', kind: 'Proxy' } });
    expect(body.message).toMatch(/^Proxy\.egress-proxies\.io "a" is invalid: \[metadata\.labels: Invalid value: "-bad": name part must consist of/);
    expect(body.details.causes).toEqual([
      { reason: 'FieldValueInvalid', field: 'metadata.labels', message: expect.stringMatching(/^Invalid value: "-bad": name part must consist of/) as unknown },
      { reason: 'FieldValueInvalid', field: 'metadata.labels', message: `Invalid value: "${'v'.repeat(70)}": must be no more than 63 bytes` },
    ]);
    expect(kube.listObjects('egress-proxies.io', 'v1alpha1', 'proxies')).toEqual([]);
  });

  it('an update that adds a bad label is refused and leaves the object as it was', async () => {
    const created = (await createProxy({ name: 'b', labels: { team: 'web' } })) as { metadata: Record<string, unknown> };
    const body = await refusal(() =>
      crs.replaceNamespacedCustomObject({
        ...GROUP,
        plural: 'proxies',
        namespace: 'default',
        name: 'b',
        body: proxy({ ...created.metadata, labels: { team: 'web-' } }),
      }),
    );
    expect(body.details.causes).toEqual([
      expect.objectContaining({ field: 'metadata.labels', message: expect.stringContaining('Invalid value: "web-"') as unknown }),
    ]);
    expect(kube.getObject('egress-proxies.io', 'v1alpha1', 'proxies', 'default', 'b')?.metadata.labels).toEqual({ team: 'web' });
  });

  it('Pods and Secrets are held to the same rules', async () => {
    const pod = await refusal(() =>
      core.createNamespacedPod({
        namespace: 'default',
        body: { metadata: { name: 'p', labels: { app: 'x_' } }, spec: { containers: [{ name: 'c', image: 'i' }] } },
      }),
    );
    expect(pod.message).toMatch(/^Pod "p" is invalid: metadata\.labels: Invalid value: "x_": a valid label must be/);
    const secret = await refusal(() => core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 's', labels: { 'a/b/c': 'x' } } } }));
    expect(secret.details.causes[0]).toMatchObject({ field: 'metadata.labels', message: expect.stringContaining('Invalid value: "a/b/c"') as unknown });
  });
});

describe("a CRD's metadata.name restrictions", () => {
  it('a Proxy name of 64 characters: Too long, as the CRD says (at most 63)', async () => {
    const name = 'n'.repeat(64);
    const body = await refusal(() => createProxy({ name }));
    expect(body.message).toBe(`Proxy.egress-proxies.io "${name}" is invalid: metadata.name: Too long: may not be more than 63 bytes`);
    expect(body.details.causes).toEqual([{ reason: 'FieldValueTooLong', field: 'metadata.name', message: 'Too long: may not be more than 63 bytes' }]);
  });

  it('a ProxyPool name of 58 characters (the CRD allows 57) is refused; 57 is accepted', async () => {
    const pool = (name: string) => ({
      apiVersion: 'egress-proxies.io/v1alpha1',
      kind: 'ProxyPool',
      metadata: { name },
      spec: { replicas: 1, template: { spec: { provider: 'local' } } },
    });
    const body = await refusal(() => crs.createNamespacedCustomObject({ ...GROUP, plural: 'proxypools', namespace: 'default', body: pool('n'.repeat(58)) }));
    expect(body.details.causes).toEqual([{ reason: 'FieldValueTooLong', field: 'metadata.name', message: 'Too long: may not be more than 57 bytes' }]);
    await crs.createNamespacedCustomObject({ ...GROUP, plural: 'proxypools', namespace: 'default', body: pool('n'.repeat(57)) });
    expect(kube.getObject('egress-proxies.io', 'v1alpha1', 'proxypools', 'default', 'n'.repeat(57))).toBeDefined();
  });
});

describe('the fleet label of a real install', () => {
  const spec = (fleet: string) => ({ name: 'ep-alpha-1234abcd', owner: { fleet, proxy: 'alpha' }, credentials: { username: 'u', password: 'p4ssword' } });

  it("the fleet id the prefix {egress}: used to give ('egress-') is refused; fleetOf's is accepted", async () => {
    kube.store.namespaces.add('proxies');
    const lc = createKubernetesLifecycle({ kubeConfig: kube.kubeConfig(), namespace: 'proxies', logger: silentLogger() });
    const refused = await lc.ensureInstance(spec('egress-'), new AbortController().signal).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(refused?.message).toContain('Invalid value: "egress-"');
    const fleet = fleetOf('{egress}:');
    const inst = await lc.ensureInstance(spec(fleet), new AbortController().signal);
    expect(inst.name).toBe('ep-alpha-1234abcd');
    expect(kube.getPod('proxies', 'ep-alpha-1234abcd')?.metadata.labels).toMatchObject({ 'egress-proxies/fleet': fleet });
  });
});
