/* eslint-disable @typescript-eslint/no-explicit-any -- JSON answers of any shape, asserted with toMatchObject */
import { ApiException, ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeKubeApiserver, type FakeKubeApiserver } from './index.ts';
import { gadgetCrd, GROUP, widgetCrd } from './test-crds.ts';

let kube: FakeKubeApiserver;
let crs: CustomObjectsApi;

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  crs = kube.kubeConfig().makeApiClient(CustomObjectsApi);
});
afterEach(async () => {
  await kube.close();
});

async function apiError(call: Promise<unknown>): Promise<{ code: number; status: { reason: string; message: string; details?: Record<string, unknown> } }> {
  try {
    await call;
  } catch (e) {
    if (e instanceof ApiException) return { code: e.code, status: JSON.parse(e.body as string) as never };
    throw e;
  }
  throw new Error('expected an ApiException');
}

async function get(path: string, accept = 'application/json'): Promise<Record<string, any>> {
  const r = await fetch(kube.url + path, { headers: { Authorization: `Bearer ${kube.token}`, Accept: accept } });
  return (await r.json()) as Record<string, any>;
}

const W = { group: GROUP, version: 'v1', plural: 'widgets', namespace: 'default' };
const widget = (name: string, spec: Record<string, unknown> = { color: 'red' }, labels?: Record<string, string>): Record<string, unknown> => ({
  apiVersion: `${GROUP}/v1`,
  kind: 'Widget',
  metadata: { name, ...(labels ? { labels } : {}) },
  spec,
});
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
const apply = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);

describe('fake kube-apiserver: CRD registration and discovery', () => {
  it('registers a CRD through ApiextensionsV1Api, marks it Established and serves it in discovery', async () => {
    const ext = kube.kubeConfig().makeApiClient(ApiextensionsV1Api);
    const created = await ext.createCustomResourceDefinition({ body: widgetCrd() as never });
    expect(created.metadata?.generation).toBe(1);
    const read = await ext.readCustomResourceDefinition({ name: `widgets.${GROUP}` });
    expect(read.status?.conditions?.map((c) => [c.type, c.status])).toEqual([
      ['NamesAccepted', 'True'],
      ['Established', 'True'],
    ]);
    expect(read.status?.acceptedNames).toMatchObject({ plural: 'widgets', kind: 'Widget', listKind: 'WidgetList', singular: 'widget' });
    expect(read.spec.conversion?.strategy).toBe('None');
    expect((await ext.listCustomResourceDefinition()).items.map((c) => c.metadata?.name)).toEqual([`widgets.${GROUP}`]);

    const groups = await get('/apis');
    expect(groups.groups.map((g: { name: string }) => g.name)).toEqual(
      expect.arrayContaining([GROUP, 'apps', 'rbac.authorization.k8s.io', 'apiextensions.k8s.io']),
    );
    const resources = await get(`/apis/${GROUP}/v1`);
    expect(resources).toMatchObject({ kind: 'APIResourceList', groupVersion: `${GROUP}/v1` });
    expect(resources.resources).toEqual([
      {
        name: 'widgets',
        singularName: 'widget',
        namespaced: true,
        kind: 'Widget',
        verbs: expect.arrayContaining(['create', 'watch', 'patch']),
        shortNames: ['wd'],
        categories: ['all'],
      },
      { name: 'widgets/status', singularName: '', namespaced: true, kind: 'Widget', verbs: ['get', 'patch', 'update'] },
    ]);
  });

  it('refuses a CRD whose name is not <plural>.<group> or whose schema is not structural (422), and deletes a CRD with its custom resources', async () => {
    const bad = { ...widgetCrd(), metadata: { name: 'widgets.other.io' } };
    const e = await apiError(
      kube
        .kubeConfig()
        .makeApiClient(ApiextensionsV1Api)
        .createCustomResourceDefinition({ body: bad as never }),
    );
    expect(e.code).toBe(422);
    expect(e.status.message).toBe(
      'CustomResourceDefinition.apiextensions.k8s.io "widgets.other.io" is invalid: metadata.name: Invalid value: "widgets.other.io": must be spec.names.plural+"."+spec.group',
    );
    const crd = widgetCrd() as { spec: { versions: { schema: { openAPIV3Schema: { properties: Record<string, unknown> } } }[] } };
    crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec = { type: 'object', additionalProperties: false };
    const open = await apiError(
      kube
        .kubeConfig()
        .makeApiClient(ApiextensionsV1Api)
        .createCustomResourceDefinition({ body: crd as never }),
    );
    expect([open.code, open.status.message]).toEqual([
      422,
      `CustomResourceDefinition.apiextensions.k8s.io "widgets.${GROUP}" is invalid: spec.versions[0].schema.openAPIV3Schema.properties[spec].additionalProperties: Forbidden: additionalProperties cannot be set to false`,
    ]);
    kube.registerCrd(widgetCrd());
    await crs.createNamespacedCustomObject({ ...W, body: widget('w1') });
    await kube
      .kubeConfig()
      .makeApiClient(ApiextensionsV1Api)
      .deleteCustomResourceDefinition({ name: `widgets.${GROUP}` });
    expect((await apiError(crs.listNamespacedCustomObject(W))).code).toBe(404);
    expect((await get(`/apis/${GROUP}/v1`)).code).toBe(404);
  });
});

describe('fake kube-apiserver: custom resources through CustomObjectsApi', () => {
  beforeEach(() => {
    kube.registerCrd(widgetCrd());
    kube.registerCrd(gadgetCrd());
  });

  it('creates with generation 1 and defaults, reads, lists with selectors and chunks, deletes', async () => {
    const created = await crs.createNamespacedCustomObject({ ...W, body: widget('w1', { color: 'red' }, { tier: 'a' }) });
    expect(created).toMatchObject({
      apiVersion: `${GROUP}/v1`,
      kind: 'Widget',
      metadata: { name: 'w1', namespace: 'default', generation: 1 },
      spec: { size: 1 },
    });
    await crs.createNamespacedCustomObject({ ...W, body: widget('w2', { color: 'blue' }, { tier: 'b' }) });
    await crs.createNamespacedCustomObject({ ...W, body: widget('w3', { color: 'blue' }, { tier: 'a' }) });
    expect(await crs.getNamespacedCustomObject({ ...W, name: 'w2' })).toMatchObject({ spec: { color: 'blue' } });

    const selected = await crs.listNamespacedCustomObject({ ...W, labelSelector: 'tier=a' });
    expect(selected).toMatchObject({ kind: 'WidgetList', apiVersion: `${GROUP}/v1` });
    expect(selected.items.map((i: { metadata: { name: string } }) => i.metadata.name)).toEqual(['w1', 'w3']);
    expect(selected.items[0]).toMatchObject({ apiVersion: `${GROUP}/v1`, kind: 'Widget' });
    const page1 = await crs.listNamespacedCustomObject({ ...W, limit: 2 });
    expect(page1.metadata).toMatchObject({ remainingItemCount: 1, continue: expect.any(String) });
    const page2 = await crs.listNamespacedCustomObject({ ...W, limit: 2, _continue: page1.metadata.continue });
    expect(page2.items.map((i: { metadata: { name: string } }) => i.metadata.name)).toEqual(['w3']);

    const deleted = await crs.deleteNamespacedCustomObject({ ...W, name: 'w1' });
    expect(deleted).toMatchObject({ kind: 'Widget', metadata: { name: 'w1' } });
    const missing = await apiError(crs.getNamespacedCustomObject({ ...W, name: 'w1' }));
    expect(missing.code).toBe(404);
    expect(missing.status.message).toBe(`widgets.${GROUP} "w1" not found`);
    expect(missing.status.details).toEqual({ name: 'w1', group: GROUP, kind: 'widgets' });
    const again = await apiError(crs.createNamespacedCustomObject({ ...W, body: widget('w2') }));
    expect([again.code, again.status.message]).toEqual([409, `widgets.${GROUP} "w2" already exists`]);
    expect((await apiError(crs.createNamespacedCustomObject({ ...W, namespace: 'nowhere', body: widget('w9') }))).code).toBe(404);
  });

  it('serves a cluster-scoped kind', async () => {
    const G = { group: GROUP, version: 'v1', plural: 'gadgets' };
    await crs.createClusterCustomObject({
      ...G,
      body: { apiVersion: `${GROUP}/v1`, kind: 'Gadget', metadata: { name: 'g1' }, spec: { level: 2 }, status: { seen: true } },
    });
    const g = await crs.getClusterCustomObject({ ...G, name: 'g1' });
    expect(g.metadata.namespace).toBeUndefined();
    // Without a status subresource, status is written with the object.
    expect(g.status).toEqual({ seen: true });
    expect((await crs.listClusterCustomObject(G)).items).toHaveLength(1);
    expect(kube.getObject(GROUP, 'v1', 'gadgets', undefined, 'g1')?.spec).toEqual({ level: 2 });
  });

  it('updates with optimistic concurrency and bumps generation on spec changes only', async () => {
    const w = await crs.createNamespacedCustomObject({ ...W, body: widget('w1') });
    const noRv = await apiError(crs.replaceNamespacedCustomObject({ ...W, name: 'w1', body: { ...widget('w1', { color: 'blue' }) } }));
    expect(noRv.code).toBe(422);
    expect(noRv.status.message).toContain('metadata.resourceVersion: Invalid value: 0x0: must be specified for an update');

    const replaced = await crs.replaceNamespacedCustomObject({ ...W, name: 'w1', body: { ...w, spec: { color: 'blue', size: 3 } } });
    expect(replaced.metadata.generation).toBe(2);
    const stale = await apiError(crs.replaceNamespacedCustomObject({ ...W, name: 'w1', body: { ...w, spec: { color: 'red' } } }));
    expect(stale.code).toBe(409);
    expect(stale.status.message).toBe(
      `Operation cannot be fulfilled on widgets.${GROUP} "w1": the object has been modified; please apply your changes to the latest version and try again`,
    );

    const labelled = await crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: { metadata: { labels: { a: 'b' } } } }, merge);
    expect(labelled.metadata).toMatchObject({ generation: 2, labels: { a: 'b' } });
    expect(labelled.metadata.resourceVersion).not.toBe(replaced.metadata.resourceVersion);
    const noop = await crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: { metadata: { labels: { a: 'b' } } } }, merge);
    expect(noop.metadata.resourceVersion).toBe(labelled.metadata.resourceVersion);
    const patched = await crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: [{ op: 'replace', path: '/spec/size', value: 4 }] }, jsonPatch);
    expect(patched).toMatchObject({ metadata: { generation: 3 }, spec: { size: 4 } });
    const stalePatch = await apiError(
      crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: { metadata: { resourceVersion: w.metadata.resourceVersion }, spec: { size: 5 } } }, merge),
    );
    expect(stalePatch.code).toBe(409);
    const smp = await apiError(
      crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: {} }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch)),
    );
    expect(smp.code).toBe(415);
  });

  it('writes status only through /status; the main resource ignores status', async () => {
    await crs.createNamespacedCustomObject({ ...W, body: { ...widget('w1'), status: { message: 'ignored' } } });
    expect((await crs.getNamespacedCustomObject({ ...W, name: 'w1' })).status).toBeUndefined();
    const ready = { conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: '2026-01-01T00:00:00Z' }], observedGeneration: 1 };
    const st = await crs.patchNamespacedCustomObjectStatus({ ...W, name: 'w1', body: { spec: { color: 'blue' }, status: ready } }, merge);
    expect(st).toMatchObject({ spec: { color: 'red' }, status: ready, metadata: { generation: 1 } });
    const main = await crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: { status: { message: 'nope' } } }, merge);
    expect(main.status).toEqual(ready);
    const put = await crs.replaceNamespacedCustomObjectStatus({ ...W, name: 'w1', body: { ...st, status: { ...ready, message: 'hi' } } });
    expect(put.status.message).toBe('hi');
    expect((await apiError(crs.patchNamespacedCustomObjectStatus({ ...W, name: 'ghost', body: { status: {} } }, merge))).code).toBe(404);
  });

  it('server-side apply creates, then merges list-map entries by key (spec and status)', async () => {
    const opts = { ...W, name: 'w1', fieldManager: 'test', force: true };
    const created = await crs.patchNamespacedCustomObject({ ...opts, body: { ...widget('w1', { color: 'red', parts: [{ name: 'a', weight: 1 }] }) } }, apply);
    expect(created.metadata.generation).toBe(1);
    const merged = await crs.patchNamespacedCustomObject({ ...opts, body: widget('w1', { color: 'red', parts: [{ name: 'b', weight: 2 }] }) }, apply);
    expect(merged.spec.parts).toEqual([
      { name: 'a', weight: 1 },
      { name: 'b', weight: 2 },
    ]);
    const st1 = { apiVersion: `${GROUP}/v1`, kind: 'Widget', metadata: { name: 'w1' }, status: { conditions: [{ type: 'Ready', status: 'False' }] } };
    await crs.patchNamespacedCustomObjectStatus({ ...opts, body: st1 }, apply);
    const st2 = {
      ...st1,
      status: {
        conditions: [
          { type: 'Synced', status: 'True' },
          { type: 'Ready', status: 'True' },
        ],
      },
    };
    const after = await crs.patchNamespacedCustomObjectStatus({ ...opts, body: st2 }, apply);
    expect(after.status.conditions).toEqual([
      { type: 'Ready', status: 'True' },
      { type: 'Synced', status: 'True' },
    ]);
    const missing = await apiError(crs.patchNamespacedCustomObjectStatus({ ...opts, name: 'ghost', body: { ...st1, metadata: { name: 'ghost' } } }, apply));
    expect(missing.code).toBe(404);
    const noManager = await apiError(crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: widget('w1') }, apply));
    expect(noManager.code).toBe(400);
  });

  it('validates against the structural schema with the real wording, prunes unknown fields and keeps preserved ones', async () => {
    const e = await apiError(
      crs.createNamespacedCustomObject({
        ...W,
        body: widget('w1', {
          color: 'green',
          size: 11,
          label: 'ABC',
          since: 'yesterday',
          ports: [1, 2, 3],
          parts: [{ name: 'a' }, { name: 'a' }],
          tags: { x: 1 },
        }),
      }),
    );
    expect(e.code).toBe(422);
    expect(e.status.reason).toBe('Invalid');
    expect(e.status.details).toMatchObject({ name: 'w1', group: GROUP, kind: 'Widget' });
    const causes = e.status.details!.causes as { reason: string; field: string; message: string }[];
    expect(causes).toEqual(
      expect.arrayContaining([
        { reason: 'FieldValueNotSupported', field: 'spec.color', message: 'Unsupported value: "green": supported values: "red", "blue"' },
        { reason: 'FieldValueInvalid', field: 'spec.size', message: 'Invalid value: 11: spec.size in body should be less than or equal to 10' },
        { reason: 'FieldValueInvalid', field: 'spec.label', message: `Invalid value: "ABC": spec.label in body should match '^[a-z]+$'` },
        { reason: 'FieldValueInvalid', field: 'spec.since', message: 'Invalid value: "yesterday": spec.since in body must be of type date-time: "yesterday"' },
        { reason: 'FieldValueTooMany', field: 'spec.ports', message: 'Too many: 3: must have at most 2 items' },
        { reason: 'FieldValueDuplicate', field: 'spec.parts[1]', message: 'Duplicate value: map[string]interface {}{"name":"a"}' },
        { reason: 'FieldValueInvalid', field: 'spec.tags.x', message: 'Invalid value: "integer": spec.tags.x in body must be of type string: "integer"' },
      ]),
    );
    expect(e.status.message.startsWith(`Widget.${GROUP} "w1" is invalid: [`)).toBe(true);

    const one = await apiError(crs.createNamespacedCustomObject({ ...W, body: widget('w1', {}) }));
    expect(one.status.message).toBe(`Widget.${GROUP} "w1" is invalid: spec.color: Required value`);
    const long = await apiError(crs.createNamespacedCustomObject({ ...W, body: widget('w1', { color: 'red', label: 'abcdefghij' }) }));
    expect(long.status.details!.causes).toEqual([{ reason: 'FieldValueTooLong', field: 'spec.label', message: 'Too long: may not be more than 8 bytes' }]);

    const ok = await crs.createNamespacedCustomObject({
      ...W,
      body: { ...widget('w1', { color: 'red', note: null, unknown: 1, extra: { anything: { goes: true } } }), topLevel: 'x' },
    });
    expect(ok.spec).toEqual({ color: 'red', size: 1, note: null, extra: { anything: { goes: true } } });
    expect(ok.topLevel).toBeUndefined();
    const strict = await apiError(crs.createNamespacedCustomObject({ ...W, body: widget('w2', { color: 'red', unknown: 1 }), fieldValidation: 'Strict' }));
    expect([strict.code, strict.status.message]).toEqual([400, 'strict decoding error: unknown field "spec.unknown"']);
  });

  it('refuses an invalid status write with the status path in the cause', async () => {
    await crs.createNamespacedCustomObject({ ...W, body: widget('w1') });
    const e = await apiError(
      crs.patchNamespacedCustomObjectStatus({ ...W, name: 'w1', body: { status: { conditions: [{ type: 'Ready', status: 'Maybe' }] } } }, merge),
    );
    expect(e.code).toBe(422);
    expect(e.status.details!.causes).toEqual([
      {
        reason: 'FieldValueNotSupported',
        field: 'status.conditions[0].status',
        message: 'Unsupported value: "Maybe": supported values: "True", "False", "Unknown"',
      },
    ]);
  });

  it('keeps an object with finalizers until the last one is removed; no new finalizers while deleting', async () => {
    await crs.createNamespacedCustomObject({ ...W, body: { ...widget('w1'), metadata: { name: 'w1', finalizers: ['example.com/cleanup'] } } });
    const deleting = await crs.deleteNamespacedCustomObject({ ...W, name: 'w1' });
    expect(deleting.metadata).toMatchObject({ deletionTimestamp: expect.any(String), deletionGracePeriodSeconds: 0, finalizers: ['example.com/cleanup'] });
    const still = await crs.getNamespacedCustomObject({ ...W, name: 'w1' });
    expect(still.metadata.deletionTimestamp).toBe(deleting.metadata.deletionTimestamp);
    const more = await apiError(
      crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: { metadata: { finalizers: ['example.com/cleanup', 'example.com/other'] } } }, merge),
    );
    expect(more.code).toBe(422);
    expect(more.status.message).toContain('no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/other"}');
    await crs.patchNamespacedCustomObject({ ...W, name: 'w1', body: [{ op: 'remove', path: '/metadata/finalizers' }] }, jsonPatch);
    expect((await apiError(crs.getNamespacedCustomObject({ ...W, name: 'w1' }))).code).toBe(404);
  });

  it('garbage-collects a Secret and a custom resource owned by a deleted custom resource', async () => {
    const owner = await crs.createNamespacedCustomObject({ ...W, body: widget('owner') });
    const ref = { apiVersion: `${GROUP}/v1`, kind: 'Widget', name: 'owner', uid: owner.metadata.uid, controller: true, blockOwnerDeletion: true };
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'owner-creds', ownerReferences: [ref] }, stringData: { a: 'b' } } });
    await core.createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'unrelated' } } });
    await crs.createNamespacedCustomObject({ ...W, body: { ...widget('child'), metadata: { name: 'child', ownerReferences: [ref] } } });
    await crs.deleteNamespacedCustomObject({ ...W, name: 'owner' });
    expect(kube.getSecret('default', 'owner-creds')).toBeUndefined();
    expect(kube.getSecret('default', 'unrelated')).toBeDefined();
    expect(kube.getObject(GROUP, 'v1', 'widgets', 'default', 'child')).toBeUndefined();
  });

  it('answers a Table with the printer columns for as=Table', async () => {
    await crs.createNamespacedCustomObject({ ...W, body: widget('w1', { color: 'red', size: 3 }) });
    kube.updateObject(GROUP, 'v1', 'widgets', 'default', 'w1', (o) => (o.status = { conditions: [{ type: 'Ready', status: 'True' }] }), 'status');
    await crs.createNamespacedCustomObject({ ...W, body: widget('w2') });
    const table = await get(`/apis/${GROUP}/v1/namespaces/default/widgets`, 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json');
    expect(table).toMatchObject({ kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: expect.any(String) } });
    expect(table.columnDefinitions.map((c: { name: string; type: string }) => [c.name, c.type])).toEqual([
      ['Name', 'string'],
      ['Size', 'integer'],
      ['Ready', 'string'],
      ['Age', 'date'],
    ]);
    expect(table.rows.map((r: { cells: unknown[] }) => r.cells.slice(0, 3))).toEqual([
      ['w1', 3, 'True'],
      ['w2', 1, null],
    ]);
    expect(table.rows[0].cells[3]).toMatch(/^\d+s$/);
    expect(table.rows[0].object).toMatchObject({ kind: 'PartialObjectMetadata', metadata: { name: 'w1' } });
    const one = await get(`/apis/${GROUP}/v1/namespaces/default/widgets/w2`, 'application/json;as=Table;v=v1;g=meta.k8s.io');
    expect(one.rows).toHaveLength(1);
  });

  it('answers injected faults on custom-resource routes', async () => {
    kube.injectFault({ match: { method: 'POST', path: `/apis/${GROUP}/v1/namespaces/default/widgets` }, status: 503 });
    expect((await apiError(crs.createNamespacedCustomObject({ ...W, body: widget('w1') }))).code).toBe(503);
    expect((await crs.createNamespacedCustomObject({ ...W, body: widget('w1') })).metadata.name).toBe('w1');
  });
});
