/**
 * Second-client cross-check: the fake Compute API driven by `@googleapis/compute` (the discovery-generated
 * REST client, through gaxios), a library the fake was not written against and that shares no code with
 * `@google-cloud/compute` (gax). Lists with paging, get, label changes under the fingerprint precondition,
 * delete and firewall writes with operation polling, a preempted instance started again, and the API's
 * error for a missing instance must all work for it.
 */
import { auth, compute as computeApi, type compute_v1 } from '@googleapis/compute';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCompute, type FakeCompute } from './index.ts';

const Z = 'us-central1-a';
const project = 'egress-test';
let fake: FakeCompute;
let api: compute_v1.Compute;

beforeEach(async () => {
  fake = await startFakeCompute({ project });
  const client = new auth.OAuth2();
  client.setCredentials({ access_token: 'fake-access-token' });
  api = computeApi({ version: 'v1', auth: client, rootUrl: `${fake.url}/`, retry: false });
});
afterEach(async () => {
  await fake.close();
});

/** Polls a zonal or global operation with the client's own calls until it is DONE. */
async function done(op: compute_v1.Schema$Operation, zone?: string): Promise<compute_v1.Schema$Operation> {
  let current = op;
  while (current.status !== 'DONE') {
    const name = current.name ?? '';
    current = zone
      ? (await api.zoneOperations.wait({ project, zone, operation: name })).data
      : (await api.globalOperations.wait({ project, operation: name })).data;
  }
  return current;
}

describe('@googleapis/compute against the fake Compute API', () => {
  it('lists every instance across pages of the aggregated list', async () => {
    for (let i = 0; i < 5; i++) fake.seedInstance(i % 2 ? Z : 'europe-west1-b', { name: `p${i}`, labels: { 'managed-by': 'egress-proxies' } });
    const names: string[] = [];
    let pageToken: string | undefined;
    let pages = 0;
    do {
      const { data } = await api.instances.aggregatedList({ project, maxResults: 2, pageToken, filter: 'labels.managed-by = "egress-proxies"' });
      pages++;
      for (const scoped of Object.values(data.items ?? {})) for (const i of scoped.instances ?? []) names.push(i.name ?? '');
      pageToken = data.nextPageToken ?? undefined;
    } while (pageToken);
    expect(names.sort()).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
    expect(pages).toBe(3);
    const lists = fake.requests.filter((q) => q.path.endsWith('/aggregated/instances'));
    expect(lists.map((q) => q.query.maxResults)).toEqual(['2', '2', '2']);
    expect(lists.slice(1).every((q) => q.query.pageToken)).toBe(true);
    expect(lists.every((q) => q.authorization === 'Bearer fake-access-token')).toBe(true);
  });

  it('sets labels under the fingerprint, refuses a stale one, and deletes, polling the operations', async () => {
    fake.setOperationPolls(1);
    fake.seedInstance(Z, { name: 'vm', labels: { 'managed-by': 'egress-proxies' } });
    const { data: vm } = await api.instances.get({ project, zone: Z, instance: 'vm' });
    expect(vm).toMatchObject({ name: 'vm', status: 'RUNNING', labels: { 'managed-by': 'egress-proxies' } });
    const fingerprint = vm.labelFingerprint ?? '';
    expect(fingerprint).not.toBe('');

    const labelled = await api.instances.setLabels({
      project,
      zone: Z,
      instance: 'vm',
      requestBody: { labels: { 'managed-by': 'egress-proxies', pool: 'eu' }, labelFingerprint: fingerprint },
    });
    expect((await done(labelled.data, Z)).error).toBeUndefined();
    expect(fake.getInstance(Z, 'vm')!.labels).toEqual({ 'managed-by': 'egress-proxies', pool: 'eu' });

    // The fingerprint read before the change is stale now.
    const stale = await api.instances
      .setLabels({ project, zone: Z, instance: 'vm', requestBody: { labels: { pool: 'us' }, labelFingerprint: fingerprint } })
      .then(
        () => undefined,
        (e: unknown) => e as { status?: number; message?: string },
      );
    expect(stale?.status).toBe(412);
    expect(fake.getInstance(Z, 'vm')!.labels).toEqual({ 'managed-by': 'egress-proxies', pool: 'eu' });

    const deleted = await api.instances.delete({ project, zone: Z, instance: 'vm' });
    expect(deleted.data.status).not.toBe('DONE');
    expect((await done(deleted.data, Z)).status).toBe('DONE');
    expect(fake.getInstance(Z, 'vm')).toBeUndefined();
    expect(fake.requests.some((q) => q.method === 'POST' && q.path.endsWith(`/zones/${Z}/operations/${deleted.data.name}/wait`))).toBe(true);
  });

  it('creates and patches a firewall rule, polling global operations, and gets the validation error of a bad range', async () => {
    fake.setOperationPolls(1);
    const created = await api.firewalls.insert({
      project,
      requestBody: {
        name: 'allow-proxy',
        network: 'global/networks/default',
        allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }],
        sourceRanges: ['203.0.113.0/24'],
        targetTags: ['egress-proxy-gce'],
      },
    });
    expect((await done(created.data)).status).toBe('DONE');
    expect(fake.getFirewall('allow-proxy')).toMatchObject({
      sourceRanges: ['203.0.113.0/24'],
      targetTags: ['egress-proxy-gce'],
      allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }],
    });
    const patched = await api.firewalls.patch({ project, firewall: 'allow-proxy', requestBody: { sourceRanges: ['198.51.100.0/24'] } });
    await done(patched.data);
    expect(fake.getFirewall('allow-proxy')?.sourceRanges).toEqual(['198.51.100.0/24']);
    expect(fake.requests.some((q) => q.method === 'PATCH' && q.path.endsWith('/global/firewalls/allow-proxy'))).toBe(true);
    expect(fake.requests.some((q) => q.path.includes('/global/operations/'))).toBe(true);

    const bad = await api.firewalls
      .insert({ project, requestBody: { name: 'bad-rule', allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }], sourceRanges: ['10.0.0.0/33'] } })
      .then(
        () => undefined,
        (e: unknown) => e as { status?: number; message?: string },
      );
    expect(bad?.status).toBe(400);
    expect(bad?.message).toContain('sourceRanges');
    expect(fake.getFirewall('bad-rule')).toBeUndefined();
  });

  it('starts a preempted instance, polling the zone operation, and it gets a new external address', async () => {
    fake.seedInstance(Z, { name: 'spot', networkInterfaces: [{ accessConfigs: [{}] }] });
    fake.preemptInstance(Z, 'spot');
    expect(fake.getInstance(Z, 'spot')?.status).toBe('TERMINATED');
    const started = await api.instances.start({ project, zone: Z, instance: 'spot' });
    await done(started.data, Z);
    expect(fake.getInstance(Z, 'spot')?.status).toBe('RUNNING');
    const { data } = await api.instances.get({ project, zone: Z, instance: 'spot' });
    expect(data.networkInterfaces?.[0]?.accessConfigs?.[0]?.natIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
  });

  it('gets the API error of a missing instance: 404 naming the resource', async () => {
    const err = await api.instances.get({ project, zone: Z, instance: 'ghost' }).then(
      () => undefined,
      (e: unknown) => e as { status?: number; message?: string },
    );
    expect(err?.status).toBe(404);
    expect(err?.message).toBe("The resource 'projects/egress-test/zones/us-central1-a/instances/ghost' was not found");
  });
});
