import { FirewallsClient, GlobalOperationsClient, InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import { OAuth2Client, PassThroughClient } from 'google-auth-library';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FilterError, matchesFilter, parseFilter, startFakeCompute, type FakeCompute } from './index.ts';

// Each test gets a fresh fake and clients built against it (one shared auth client).
let compute: FakeCompute;
let instances: InstancesClient;
let operations: ZoneOperationsClient;
const auth = new OAuth2Client();
auth.setCredentials({ access_token: 'fake-access-token' });
const P = 'egress-test';
const Z = 'us-central1-a';

beforeEach(async () => {
  compute = await startFakeCompute({ project: P });
  instances = new InstancesClient({ ...compute.clientOptions(), authClient: auth });
  operations = new ZoneOperationsClient({ ...compute.clientOptions(), authClient: auth });
});
afterEach(async () => {
  await instances.close();
  await operations.close();
  await compute.close();
});

/** Runs a call that must fail and returns its GaxiosError-shaped error. */
async function failure(call: Promise<unknown>): Promise<Error & { code?: unknown; status?: unknown }> {
  try {
    await call;
  } catch (e) {
    return e as Error & { code?: unknown; status?: unknown };
  }
  throw new Error('expected the call to fail');
}

const reasonOf = (e: Error): string => (JSON.parse(e.message) as { error: { errors: { reason: string }[] } }).error.errors[0]!.reason;

describe('fake Compute API through @google-cloud/compute', () => {
  it('inserts an instance whose operation stays RUNNING for N polls, then DONE and RUNNING', async () => {
    compute.setOperationPolls(2);
    const [lro] = await instances.insert({
      project: P,
      zone: Z,
      instanceResource: {
        name: 'proxy-1',
        machineType: `zones/${Z}/machineTypes/e2-micro`,
        labels: { 'managed-by': 'egress-proxies' },
        networkInterfaces: [{ accessConfigs: [{ name: 'nat' }] }],
      },
    });
    const opName = lro.latestResponse.name;
    expect(compute.getInstance(Z, 'proxy-1')?.status).toBe('PROVISIONING');
    const statuses: unknown[] = [];
    for (;;) {
      const [op] = await operations.wait({ project: P, zone: Z, operation: opName });
      statuses.push(op.status);
      if (op.status === 'DONE') {
        expect(op.error).toBeFalsy();
        break;
      }
    }
    expect(statuses).toEqual(['RUNNING', 'RUNNING', 'DONE']);
    const [inst] = await instances.get({ project: P, zone: Z, instance: 'proxy-1' });
    expect(inst.status).toBe('RUNNING');
    expect(inst.networkInterfaces?.[0]?.accessConfigs?.[0]?.natIP).toMatch(/^34\./);
    expect(inst.zone).toBe(`${compute.url}/compute/v1/projects/${P}/zones/${Z}`);

    const insertReq = compute.requests.find((r) => r.method === 'POST' && r.path.endsWith('/instances'))!;
    expect(insertReq.contentType).toBe('application/json');
    expect(JSON.parse(insertReq.body)).toMatchObject({ name: 'proxy-1', labels: { 'managed-by': 'egress-proxies' } });
    const waitReq = compute.requests.find((r) => r.path.endsWith('/wait'))!;
    expect(waitReq.method).toBe('POST');
    expect(waitReq.path).toBe(`/compute/v1/projects/${P}/zones/${Z}/operations/${opName}/wait`);
  });

  it('answers a repeated insert with the same requestId with the first operation', async () => {
    const body = { name: 'once', machineType: `zones/${Z}/machineTypes/e2-micro` };
    const [first] = await instances.insert({ project: P, zone: Z, requestId: '9a1c3f4e-0000-4000-8000-000000000001', instanceResource: body });
    const [again] = await instances.insert({ project: P, zone: Z, requestId: '9a1c3f4e-0000-4000-8000-000000000001', instanceResource: body });
    expect(again.latestResponse.name).toBe(first.latestResponse.name);
    expect(compute.listInstances().map((i) => i.name)).toEqual(['once']);
    expect(compute.requests.map((r) => r.query.requestId)).toEqual(['9a1c3f4e-0000-4000-8000-000000000001', '9a1c3f4e-0000-4000-8000-000000000001']);
  });

  it('reports a provisioning failure as HTTP 200 + DONE + error, and leaves no instance', async () => {
    compute.failNextOperation({ code: 'QUOTA_EXCEEDED' });
    const [lro] = await instances.insert({ project: P, zone: Z, instanceResource: { name: 'proxy-q', machineType: 'zones/x/machineTypes/e2-micro' } });
    const [op] = await operations.get({ project: P, zone: Z, operation: lro.latestResponse.name });
    expect(op.status).toBe('DONE');
    expect(op.error?.errors?.[0]?.code).toBe('QUOTA_EXCEEDED');
    expect(op.httpErrorStatusCode).toBe(403);
    expect(compute.getInstance(Z, 'proxy-q')).toBeUndefined();
    expect(compute.requests.at(-1)!.status).toBe(200);
  });

  it('deletes through STOPPING, and stops to TERMINATED', async () => {
    compute.seedInstance(Z, { name: 'a' });
    compute.seedInstance(Z, { name: 'b' });
    compute.setOperationPolls(1);
    const [del] = await instances.delete({ project: P, zone: Z, instance: 'a' });
    expect(compute.getInstance(Z, 'a')?.status).toBe('STOPPING');
    const [stop] = await instances.stop({ project: P, zone: Z, instance: 'b' });
    for (const lro of [del, stop]) {
      let status: unknown;
      while (status !== 'DONE') [{ status }] = await operations.wait({ project: P, zone: Z, operation: lro.latestResponse.name });
    }
    expect(compute.getInstance(Z, 'a')).toBeUndefined();
    expect(compute.getInstance(Z, 'b')?.status).toBe('TERMINATED');
  });

  it('answers errors as GaxiosError with the HTTP code and the Apiary body as message', async () => {
    compute.seedInstance(Z, { name: 'dup' });
    const dup = await failure(instances.insert({ project: P, zone: Z, instanceResource: { name: 'dup', machineType: 'zones/x/machineTypes/e2-micro' } }));
    expect(dup.constructor.name).toBe('GaxiosError');
    expect(dup.code).toBe(409);
    expect(dup.status).toBe(409);
    expect(reasonOf(dup)).toBe('alreadyExists');

    const bad = await failure(instances.insert({ project: P, zone: Z, instanceResource: { name: 'Bad_Name', machineType: 'zones/x/machineTypes/e2-micro' } }));
    expect([bad.code, reasonOf(bad)]).toEqual([400, 'invalid']);

    const missing = await failure(instances.get({ project: P, zone: Z, instance: 'nope' }));
    expect([missing.code, reasonOf(missing)]).toEqual([404, 'notFound']);
    expect(JSON.parse(missing.message).error.message).toBe(`The resource 'projects/${P}/zones/${Z}/instances/nope' was not found`);

    const zone = await failure(instances.get({ project: P, zone: 'mars-north1-a', instance: 'x' }));
    expect(zone.code).toBe(404);

    const other = await failure(instances.get({ project: 'other', zone: Z, instance: 'x' }));
    expect([other.code, reasonOf(other)]).toEqual([403, 'forbidden']);
  });

  it('sets labels under a fingerprint precondition (412 conditionNotMet when stale)', async () => {
    const seeded = compute.seedInstance(Z, { name: 'l', labels: { 'managed-by': 'egress-proxies' } });
    const stale = await failure(
      instances.setLabels({ project: P, zone: Z, instance: 'l', instancesSetLabelsRequestResource: { labels: { a: 'b' }, labelFingerprint: 'c3RhbGU=' } }),
    );
    expect([stale.code, reasonOf(stale)]).toEqual([412, 'conditionNotMet']);
    const [lro] = await instances.setLabels({
      project: P,
      zone: Z,
      instance: 'l',
      instancesSetLabelsRequestResource: { labels: { a: 'b' }, labelFingerprint: seeded.labelFingerprint },
    });
    await operations.wait({ project: P, zone: Z, operation: lro.latestResponse.name });
    const after = compute.getInstance(Z, 'l')!;
    expect(after.labels).toEqual({ a: 'b' });
    expect(after.labelFingerprint).not.toBe(seeded.labelFingerprint);
  });

  it('sets metadata under its fingerprint (412 conditionNotMet when missing or stale), replacing every item, within the limits', async () => {
    const [ins] = await instances.insert({
      project: P,
      zone: Z,
      instanceResource: { name: 'm', machineType: 'zones/x/machineTypes/e2-micro', metadata: { items: [{ key: 'a', value: '1' }] } },
    });
    await operations.wait({ project: P, zone: Z, operation: ins.latestResponse.name });
    const [got] = await instances.get({ project: P, zone: Z, instance: 'm' });
    expect(got.metadata?.items?.map((i) => [i.key, i.value])).toEqual([['a', '1']]);
    const fingerprint = got.metadata?.fingerprint ?? '';
    expect(fingerprint).not.toBe('');
    const set = (metadataResource: object) => instances.setMetadata({ project: P, zone: Z, instance: 'm', metadataResource });
    for (const stale of [{ items: [] }, { fingerprint: 'c3RhbGU=', items: [] }]) {
      const err = await failure(set(stale));
      expect([err.code, reasonOf(err)]).toEqual([412, 'conditionNotMet']);
    }
    expect([(await failure(set({ fingerprint, items: [{ key: 'bad key', value: 'x' }] }))).code]).toEqual([400]);
    expect(
      (
        await failure(
          set({
            fingerprint,
            items: [
              { key: 'k', value: 'x' },
              { key: 'k', value: 'y' },
            ],
          }),
        )
      ).code,
    ).toBe(400);
    expect((await failure(set({ fingerprint, items: [{ key: 'big', value: 'x'.repeat(256 * 1024 + 1) }] }))).code).toBe(400);
    const [lro] = await set({ fingerprint, items: [{ key: 'b', value: '2' }] });
    await operations.wait({ project: P, zone: Z, operation: lro.latestResponse.name });
    const after = compute.getInstance(Z, 'm')!;
    expect(after.metadata.items).toEqual([{ key: 'b', value: '2' }]);
    expect(after.metadata.fingerprint).not.toBe(fingerprint);
    // The old fingerprint is stale now.
    expect((await failure(set({ fingerprint, items: [] }))).code).toBe(412);
  });

  it('compares a label fingerprint as bytes: the URL-safe base64 form gcloud sends is the same fingerprint', async () => {
    compute.seedInstance(Z, { name: 'u', labelFingerprint: '+/+/+/+/+/8=' });
    const [lro] = await instances.setLabels({
      project: P,
      zone: Z,
      instance: 'u',
      instancesSetLabelsRequestResource: { labels: { a: 'b' }, labelFingerprint: '-_-_-_-_-_8=' },
    });
    await operations.wait({ project: P, zone: Z, operation: lro.latestResponse.name });
    expect(compute.getInstance(Z, 'u')!.labels).toEqual({ a: 'b' });
  });

  it('reports unreachable zones with returnPartialSuccess, and fails without it', async () => {
    compute.seedInstance(Z, { name: 'seen' });
    compute.seedInstance('europe-west1-b', { name: 'hidden' });
    compute.state.unreachableZones.add('europe-west1-b');
    await instances.initialize();
    const [items, , raw] = await (
      instances.innerApiCalls.aggregatedList as (
        r: object,
        o: object,
      ) => Promise<[Record<string, { instances?: { name?: string }[] }>, unknown, { unreachables?: string[] }]>
    )({ project: P, returnPartialSuccess: true }, { autoPaginate: false });
    expect(
      Object.values(items)
        .flatMap((z) => z.instances ?? [])
        .map((i) => i.name),
    ).toEqual(['seen']);
    expect(raw.unreachables).toEqual(['zones/europe-west1-b']);
    const names: string[] = [];
    const err = await failure(
      (async () => {
        for await (const [, list] of instances.aggregatedListAsync({ project: P }, { autoPaginate: false }))
          names.push(...(list.instances ?? []).map((i) => i.name!));
      })(),
    );
    expect(err.code).toBe(503);
  });

  it('answers 401 to a request without credentials', async () => {
    const anonymous = new InstancesClient({ ...compute.clientOptions(), authClient: new PassThroughClient() });
    try {
      const e = await failure(anonymous.get({ project: P, zone: Z, instance: 'x' }));
      expect([e.code, reasonOf(e)]).toEqual([401, 'required']);
      expect(compute.requests[0]!.authorization).toBeUndefined();
    } finally {
      await anonymous.close();
    }
  });

  it('does not retry one-shot 503 and 429 faults, then serves normally', async () => {
    compute.seedInstance(Z, { name: 'x' });
    compute.injectFault({ status: 503 });
    compute.injectFault({ status: 429 });
    expect(reasonOf(await failure(instances.get({ project: P, zone: Z, instance: 'x' })))).toBe('backendError');
    expect(reasonOf(await failure(instances.get({ project: P, zone: Z, instance: 'x' })))).toBe('rateLimitExceeded');
    await instances.get({ project: P, zone: Z, instance: 'x' });
    expect(compute.requests.map((r) => r.status)).toEqual([503, 429, 200]);
  });

  it('pages the aggregated list with an opaque token and NO_RESULTS_ON_PAGE warnings', async () => {
    for (let i = 0; i < 5; i++) compute.seedInstance(i < 3 ? Z : 'europe-west1-b', { name: `p${i}`, labels: { 'managed-by': 'egress-proxies' } });
    compute.seedInstance(Z, { name: 'other', labels: { 'managed-by': 'someone' } });
    const names: string[] = [];
    const warnings = new Set<string>();
    for await (const [scope, list] of instances.aggregatedListAsync(
      { project: P, filter: 'labels.managed-by = "egress-proxies"', maxResults: 2 },
      { autoPaginate: false },
    )) {
      for (const i of list.instances ?? []) names.push(i.name!);
      if (list.warning?.code === 'NO_RESULTS_ON_PAGE') warnings.add(scope);
    }
    expect(names.sort()).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
    expect(warnings.has('zones/us-central1-b')).toBe(true);
    expect(compute.requests).toHaveLength(3);
    expect(compute.requests[0]!.query.pageToken).toBeUndefined();
    expect(compute.requests[1]!.query.pageToken).toBeTruthy();
    expect(compute.requests.every((r) => r.query.filter === 'labels.managed-by = "egress-proxies"')).toBe(true);
  });

  it('omits items in an empty zonal list and pages a zonal list by hand', async () => {
    const [empty] = await instances.list({ project: P, zone: Z }, { autoPaginate: false });
    expect(empty).toEqual([]);
    expect(JSON.parse(compute.requests[0]!.responseBody!).items).toBeUndefined();

    for (let i = 0; i < 3; i++) compute.seedInstance(Z, { name: `z${i}` });
    const [page1, next] = await instances.list({ project: P, zone: Z, maxResults: 2 }, { autoPaginate: false });
    expect(page1.map((i) => i.name)).toEqual(['z0', 'z1']);
    const [page2, last] = await instances.list(next!, { autoPaginate: false });
    expect(page2.map((i) => i.name)).toEqual(['z2']);
    expect(last).toBeNull();

    const tooMany = await failure(instances.list({ project: P, zone: Z, maxResults: 501 }, { autoPaginate: false }));
    expect([tooMany.code, reasonOf(tooMany)]).toEqual([400, 'invalid']);
  });

  it('filters by labels, status and name regex; a bad filter is 400', async () => {
    compute.seedInstance(Z, { name: 'proxy-eu', labels: { pool: 'eu', 'managed-by': 'egress-proxies' } });
    compute.seedInstance(Z, { name: 'proxy-us', labels: { pool: 'us', 'managed-by': 'egress-proxies' }, status: 'TERMINATED' });
    compute.seedInstance(Z, { name: 'web', labels: { pool: 'eu' } });
    const names = async (filter: string) => (await instances.list({ project: P, zone: Z, filter }, { autoPaginate: false }))[0].map((i) => i.name);
    expect(await names('labels.pool = "eu"')).toEqual(['proxy-eu', 'web']);
    expect(await names('labels.pool = "eu" labels.managed-by = "egress-proxies"')).toEqual(['proxy-eu']);
    expect(await names('(labels.managed-by = "egress-proxies") AND (status = RUNNING)')).toEqual(['proxy-eu']);
    expect(await names('labels.pool != "eu"')).toEqual(['proxy-us']);
    expect(await names("name eq 'proxy-.*'")).toEqual(['proxy-eu', 'proxy-us']);
    expect(await names('labels.managed-by:*')).toEqual(['proxy-eu', 'proxy-us']);
    const bad = await failure(names('labels.pool = '));
    expect([bad.code, reasonOf(bad)]).toEqual([400, 'invalid']);
  });

  it('answers 403 accessNotConfigured while the API is disabled', async () => {
    compute.disableApi();
    const e = await failure(instances.get({ project: P, zone: Z, instance: 'x' }));
    expect([e.code, reasonOf(e)]).toEqual([403, 'accessNotConfigured']);
    compute.enableApi();
    expect((await failure(instances.get({ project: P, zone: Z, instance: 'x' }))).code).toBe(404);
  });
});

describe('fake Compute API: power actions and preemption', () => {
  const natIP = (name: string) => compute.getInstance(Z, name)?.networkInterfaces[0]?.accessConfigs?.[0]?.natIP;
  async function finish(lro: { latestResponse: { name?: string | null } }): Promise<unknown> {
    let status: unknown;
    while (status !== 'DONE') [{ status }] = await operations.wait({ project: P, zone: Z, operation: lro.latestResponse.name });
    return status;
  }

  it('stops through STOPPING to TERMINATED releasing the address, and starts through STAGING with a new one', async () => {
    compute.seedInstance(Z, { name: 'vm', networkInterfaces: [{ accessConfigs: [{ name: 'External NAT' }] }] });
    const first = natIP('vm');
    expect(first).toBeTruthy();
    compute.setOperationPolls(1);
    const [stop] = await instances.stop({ project: P, zone: Z, instance: 'vm' });
    expect(compute.getInstance(Z, 'vm')?.status).toBe('STOPPING');
    await finish(stop);
    expect(compute.getInstance(Z, 'vm')?.status).toBe('TERMINATED');
    expect(natIP('vm')).toBeUndefined();
    const [start] = await instances.start({ project: P, zone: Z, instance: 'vm' });
    expect(compute.getInstance(Z, 'vm')?.status).toBe('STAGING');
    await finish(start);
    expect(compute.getInstance(Z, 'vm')?.status).toBe('RUNNING');
    expect(natIP('vm')).toBeTruthy();
    expect(natIP('vm')).not.toBe(first);
    expect(compute.requests.filter((r) => r.method === 'POST' && /\/instances\/vm\/(stop|start)$/.test(r.path)).map((r) => r.path.split('/').at(-1))).toEqual([
      'stop',
      'start',
    ]);
  });

  it('suspends through SUSPENDING to SUSPENDED and resumes to RUNNING', async () => {
    compute.seedInstance(Z, { name: 'vm', networkInterfaces: [{ accessConfigs: [{}] }] });
    const [suspend] = await instances.suspend({ project: P, zone: Z, instance: 'vm' });
    expect(compute.getInstance(Z, 'vm')?.status).toBe('SUSPENDING');
    await finish(suspend);
    expect(compute.getInstance(Z, 'vm')?.status).toBe('SUSPENDED');
    const [resume] = await instances.resume({ project: P, zone: Z, instance: 'vm' });
    await finish(resume);
    expect(compute.getInstance(Z, 'vm')?.status).toBe('RUNNING');
    expect(natIP('vm')).toBeTruthy();
  });

  it('answers 400 resourceNotReady to an action in the wrong state, and a no-op operation to a start of a running VM', async () => {
    compute.seedInstance(Z, { name: 'vm', status: 'STOPPING' });
    const e = await failure(instances.start({ project: P, zone: Z, instance: 'vm' }));
    expect([e.code, reasonOf(e)]).toEqual([400, 'resourceNotReady']);
    compute.setInstanceStatus(Z, 'vm', 'RUNNING');
    expect((await failure(instances.resume({ project: P, zone: Z, instance: 'vm' }))).code).toBe(400);
    const [start] = await instances.start({ project: P, zone: Z, instance: 'vm' });
    expect(compute.getInstance(Z, 'vm')?.status).toBe('RUNNING');
    expect(await finish(start)).toBe('DONE');
  });

  it('preempts a spot VM: TERMINATED, address released, a DONE preempted operation in the zone', async () => {
    compute.seedInstance(Z, { name: 'spot', networkInterfaces: [{ accessConfigs: [{}] }] });
    const before = natIP('spot');
    const op = compute.preemptInstance(Z, 'spot');
    const inst = compute.getInstance(Z, 'spot');
    expect(inst?.status).toBe('TERMINATED');
    expect(inst?.scheduling).toMatchObject({ provisioningModel: 'SPOT', preemptible: true });
    expect(natIP('spot')).toBeUndefined();
    const [read] = await operations.get({ project: P, zone: Z, operation: op.name });
    expect(read).toMatchObject({ operationType: 'compute.instances.preempted', status: 'DONE' });
    await finish((await instances.start({ project: P, zone: Z, instance: 'spot' }))[0]);
    expect(natIP('spot')).toBeTruthy();
    expect(natIP('spot')).not.toBe(before);
  });

  it('hands out addresses from the externalIps allocator', async () => {
    let n = 10;
    const own = await startFakeCompute({ project: P, externalIps: () => `127.0.0.${n++}` });
    try {
      const inst = own.seedInstance(Z, { name: 'vm', networkInterfaces: [{ accessConfigs: [{}] }] });
      expect(inst.networkInterfaces[0]?.accessConfigs?.[0]?.natIP).toBe('127.0.0.10');
    } finally {
      await own.close();
    }
  });
});

describe('fake Compute API: firewall rules and global operations', () => {
  let firewalls: FirewallsClient;
  let globalOps: GlobalOperationsClient;
  beforeEach(() => {
    firewalls = new FirewallsClient({ ...compute.clientOptions(), authClient: auth });
    globalOps = new GlobalOperationsClient({ ...compute.clientOptions(), authClient: auth });
  });
  afterEach(async () => {
    await firewalls.close();
    await globalOps.close();
  });
  const rule = {
    name: 'allow-proxy',
    network: 'global/networks/default',
    sourceRanges: ['10.0.0.0/8'],
    targetTags: ['egress-proxy-gce'],
    allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }],
  };
  async function finish(name: string | null | undefined): Promise<{ status?: unknown; error?: unknown }> {
    for (;;) {
      const [op] = await globalOps.wait({ project: P, operation: name });
      if (op.status === 'DONE') return op;
    }
  }

  it('inserts a rule through a global operation: 404 until it is DONE, then readable; a duplicate is 409', async () => {
    compute.setOperationPolls(1);
    const [lro] = await firewalls.insert({ project: P, firewallResource: rule });
    expect(lro.latestResponse.name).toBeTruthy();
    const early = await failure(firewalls.get({ project: P, firewall: 'allow-proxy' }));
    expect([early.code, reasonOf(early)]).toEqual([404, 'notFound']);
    expect(JSON.parse(early.message).error.message).toBe(`The resource 'projects/${P}/global/firewalls/allow-proxy' was not found`);
    const dupPending = await failure(firewalls.insert({ project: P, firewallResource: rule }));
    expect([dupPending.code, reasonOf(dupPending)]).toEqual([409, 'alreadyExists']);
    expect((await finish(lro.latestResponse.name)).error).toBeFalsy();
    const [got] = await firewalls.get({ project: P, firewall: 'allow-proxy' });
    expect(got).toMatchObject({
      name: 'allow-proxy',
      direction: 'INGRESS',
      priority: 1000,
      sourceRanges: ['10.0.0.0/8'],
      targetTags: ['egress-proxy-gce'],
      allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }],
    });
    expect(got.network).toBe(`${compute.url}/compute/v1/projects/${P}/global/networks/default`);
    const dup = await failure(firewalls.insert({ project: P, firewallResource: rule }));
    expect([dup.code, reasonOf(dup)]).toEqual([409, 'alreadyExists']);
    const paths = compute.requests.map((r) => `${r.method} ${r.path}`);
    expect(paths[0]).toBe(`POST /compute/v1/projects/${P}/global/firewalls`);
    expect(paths).toContain(`POST /compute/v1/projects/${P}/global/operations/${lro.latestResponse.name}/wait`);
  });

  it('patches the fields a patch carries, replacing lists, and refuses a network change', async () => {
    compute.seedFirewall({ ...rule, network: `${compute.url}/compute/v1/projects/${P}/global/networks/default` });
    const [lro] = await firewalls.patch({
      project: P,
      firewall: 'allow-proxy',
      firewallResource: { sourceRanges: ['192.0.2.0/24', '198.51.100.7/32'], allowed: [{ IPProtocol: 'tcp', ports: ['8080'] }] },
    });
    expect(compute.getFirewall('allow-proxy')?.sourceRanges).toEqual(['10.0.0.0/8']);
    await finish(lro.latestResponse.name);
    expect(compute.getFirewall('allow-proxy')).toMatchObject({
      sourceRanges: ['192.0.2.0/24', '198.51.100.7/32'],
      allowed: [{ IPProtocol: 'tcp', ports: ['8080'] }],
      targetTags: ['egress-proxy-gce'],
    });
    expect(compute.requests[0]?.method).toBe('PATCH');
    compute.state.networks.add('other');
    const moved = await failure(firewalls.patch({ project: P, firewall: 'allow-proxy', firewallResource: { network: 'global/networks/other' } }));
    expect([moved.code, reasonOf(moved)]).toEqual([400, 'invalid']);
    const missing = await failure(firewalls.patch({ project: P, firewall: 'nope', firewallResource: { sourceRanges: ['10.0.0.0/8'] } }));
    expect(missing.code).toBe(404);
  });

  it('validates rules: CIDRs, ports, names, an unknown network', async () => {
    const cases: [object, number, string][] = [
      [{ ...rule, sourceRanges: ['10.0.0.0/33'] }, 400, 'resource.sourceRanges[0]'],
      [{ ...rule, sourceRanges: ['10.0.0.0/8', 'not-a-cidr'] }, 400, 'resource.sourceRanges[1]'],
      [{ ...rule, allowed: [{ IPProtocol: 'tcp', ports: ['70000'] }] }, 400, 'resource.allowed[0].ports[0]'],
      [{ ...rule, allowed: [{ IPProtocol: 'icmp', ports: ['80'] }] }, 400, 'resource.allowed[0].ports'],
      [{ ...rule, name: 'Bad_Name' }, 400, 'resource.name'],
      [{ ...rule, targetTags: ['UPPER'] }, 400, 'resource.targetTags[0]'],
      [{ ...rule, network: 'global/networks/missing' }, 404, `projects/${P}/global/networks/missing`],
    ];
    for (const [body, code, mentions] of cases) {
      const e = await failure(firewalls.insert({ project: P, firewallResource: body }));
      expect(e.code, JSON.stringify(body)).toBe(code);
      expect(JSON.parse(e.message).error.message).toContain(mentions);
    }
    expect(compute.listFirewalls()).toEqual([]);
  });

  it('deletes a rule through a global operation', async () => {
    compute.seedFirewall(rule);
    const [lro] = await firewalls.delete({ project: P, firewall: 'allow-proxy' });
    await finish(lro.latestResponse.name);
    expect(compute.getFirewall('allow-proxy')).toBeUndefined();
    expect((await failure(firewalls.delete({ project: P, firewall: 'allow-proxy' }))).code).toBe(404);
  });

  it('holds only the answer with afterApply: the change is made, the client never hears of it', async () => {
    compute.injectFault({ latencyMs: 60_000, afterApply: true, match: { method: 'POST', path: `/compute/v1/projects/${P}/global/firewalls` } });
    const seen = compute.nextRequest();
    const pending = firewalls.insert({ project: P, firewallResource: rule }, { timeout: 60_000 });
    pending.catch(() => undefined);
    const req = await seen;
    // The request was routed as soon as it arrived: its operation exists, its answer is held.
    expect(compute.state.operations.size).toBe(1);
    expect(req.outcome).toBe('pending');
    compute.state.finishAllOperations();
    expect(compute.getFirewall('allow-proxy')).toBeDefined();
  });
});

describe('filter grammar', () => {
  const inst = { name: 'proxy-1', status: 'RUNNING', zone: 'https://x/zones/us-central1-a', labels: { a: '1', b: 'two' } };
  const m = (f: string) => matchesFilter(parseFilter(f), inst);

  it('evaluates comparisons and combinations', () => {
    expect(m('')).toBe(true);
    expect(m('labels.a = "1" AND labels.b = two')).toBe(true);
    expect(m('labels.a = "2" OR labels.b = "two"')).toBe(true);
    expect(m('NOT labels.a = "1"')).toBe(false);
    expect(m('-labels.a = "1"')).toBe(false);
    expect(m('zone = us-central1-a')).toBe(true);
    expect(m('labels.c != "x"')).toBe(true);
    expect(m('name ne "proxy-\\d"')).toBe(false);
    expect(m('labels.b : "tw"')).toBe(true);
  });

  it('rejects malformed filters', () => {
    for (const bad of ['labels.a =', '= "x"', '(labels.a = "1"', 'labels.a "1"', 'labels.a = "1', 'name eq "("']) {
      expect(() => m(bad), bad).toThrow(FilterError);
    }
  });
});
