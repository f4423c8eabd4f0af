/**
 * A cluster-scoped kind with a status subresource written the way a status publisher writes it
 * (ProviderHealth's shape, in miniature): server-side apply and merge patches on `/status` of a
 * cluster-scoped object, a list-map keyed by `name`, 409 on a stale resourceVersion, and the Table.
 */
import { ApiException, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';
import { gadgetCrd, GROUP } from './test-crds.ts';

let kube: FakeKubeApiserver;
let crs: CustomObjectsApi;
const G = { group: GROUP, version: 'v1', plural: 'healths' };

function healthCrd(): Record<string, unknown> {
  const base = gadgetCrd() as { spec: { versions: Record<string, unknown>[] } };
  return {
    ...base,
    metadata: { name: `healths.${GROUP}` },
    spec: {
      ...base.spec,
      names: { plural: 'healths', kind: 'Health', shortNames: ['hl'] },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: 'Targets', type: 'integer', jsonPath: '.status.targetCount' },
            { name: 'Last Check', type: 'date', jsonPath: '.status.lastCheck' },
          ],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: { type: 'object', properties: { provider: { type: 'string' } } },
                status: {
                  type: 'object',
                  properties: {
                    targetCount: { type: 'integer' },
                    lastCheck: { type: 'string', format: 'date-time' },
                    targets: {
                      type: 'array',
                      'x-kubernetes-list-type': 'map',
                      'x-kubernetes-list-map-keys': ['name'],
                      items: {
                        type: 'object',
                        required: ['name'],
                        properties: { name: { type: 'string' }, ready: { type: 'boolean' }, message: { type: 'string', maxLength: 16 } },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
}

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  kube.registerCrd(healthCrd());
  crs = kube.kubeConfig().makeApiClient(CustomObjectsApi);
});
afterEach(async () => {
  await kube.close();
});

async function code(call: Promise<unknown>): Promise<number> {
  try {
    await call;
  } catch (e) {
    if (e instanceof ApiException) return e.code;
    throw e;
  }
  return 200;
}

const applied = (targets: Record<string, unknown>[]): Record<string, unknown> => ({
  apiVersion: `${GROUP}/v1`,
  kind: 'Health',
  metadata: { name: 'kvm' },
  status: { targets, targetCount: targets.length, lastCheck: '2026-01-01T00:00:00Z' },
});

describe('fake kube-apiserver: status of a cluster-scoped custom resource', () => {
  it('takes server-side apply and merge patches on /status, merging the list-map by name', async () => {
    const created = await crs.createClusterCustomObject({
      ...G,
      body: { apiVersion: `${GROUP}/v1`, kind: 'Health', metadata: { name: 'kvm' }, spec: { provider: 'kvm' } },
    });
    const ssa = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);
    await crs.patchClusterCustomObjectStatus({ ...G, name: 'kvm', body: applied([{ name: 'a', ready: true }]), fieldManager: 'publisher', force: true }, ssa);
    const after = await crs.patchClusterCustomObjectStatus(
      { ...G, name: 'kvm', body: applied([{ name: 'b', ready: false }]), fieldManager: 'publisher', force: true },
      ssa,
    );
    expect(after.status.targets).toEqual([
      { name: 'a', ready: true },
      { name: 'b', ready: false },
    ]);
    expect(after.metadata.generation).toBe(1);

    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    const stale = { metadata: { resourceVersion: created.metadata.resourceVersion }, status: { targetCount: 0 } };
    expect(await code(crs.patchClusterCustomObjectStatus({ ...G, name: 'kvm', body: stale }, merge))).toBe(409);
    const tooLong = { status: { targets: [{ name: 'a', message: 'x'.repeat(17) }] } };
    expect(await code(crs.patchClusterCustomObjectStatus({ ...G, name: 'kvm', body: tooLong }, merge))).toBe(422);
    // client-node's default content type for this call is JSON Patch: an object body is a 400, as for real.
    expect(await code(crs.patchClusterCustomObjectStatus({ ...G, name: 'kvm', body: applied([]) }))).toBe(400);

    const table = (await (
      await fetch(`${kube.url}/apis/${GROUP}/v1/healths`, {
        headers: { Authorization: `Bearer ${kube.token}`, Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' },
      })
    ).json()) as { rows: { cells: unknown[] }[] };
    expect(table.rows[0]!.cells[0]).toBe('kvm');
    expect(table.rows[0]!.cells[1]).toBe(1); // the last apply's targetCount
    expect(table.rows[0]!.cells[2]).toMatch(/^\d+d$/);
  });
});
