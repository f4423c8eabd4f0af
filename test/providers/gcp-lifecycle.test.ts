import { Writable } from 'node:stream';
import { OAuth2Client } from 'google-auth-library';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseConfigDocument } from '../../src/config/file.ts';
import { silentLogger, type Logger } from '../../src/logging.ts';
import { createComputeClients, MANAGED_LABELS, type ComputeClients } from '../../src/providers/gcp/index.ts';
import { createFirewallEnsurer } from '../../src/providers/gcp/firewall.ts';
import {
  createGcpLifecycle,
  firewallRuleName,
  FLEET_LABEL,
  GcpAccessError,
  GcpRequestError,
  METADATA_PASSWORD,
  METADATA_POLICY,
  METADATA_PORT,
  METADATA_USER,
  PROXY_LABEL,
  proxyNetworkTag,
  type GcpLifecycleOptions,
} from '../../src/providers/gcp/lifecycle.ts';
import { ProvisioningError, type Instance, type InstanceSpec, type ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { startFakeCompute, type FakeCompute } from '../fakes/compute/index.ts';
import { Registry } from 'prom-client';
import { egressGuards, proxyEgressPolicy, type ProxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { createGcpProvider, gcpProviderSchema } from '../../src/providers/gcp/index.ts';

const ZONE = 'us-central1-a';
let compute: FakeCompute;
let clients: ComputeClients;

beforeEach(async () => {
  compute = await startFakeCompute({ project: 'egress-test', tokens: ['good-token'] });
  const auth = new OAuth2Client();
  auth.setCredentials({ access_token: 'good-token', expiry_date: Date.now() + 3_600_000 });
  clients = createComputeClients({ ...compute.clientOptions(), authClient: auth });
});

afterEach(async () => {
  await clients.close();
  await compute.close();
});

const signal = () => new AbortController().signal;

function lifecycle(overrides: Partial<GcpLifecycleOptions> = {}): ProxyLifecycle {
  return createGcpLifecycle({
    clients,
    project: 'egress-test',
    zone: ZONE,
    image: 'projects/egress-images/global/images/family/forward-proxy',
    logger: silentLogger(),
    operationPollMs: 0,
    ...overrides,
  });
}

function spec(name = 'ep-alpha-1234abcd', proxy = 'alpha', fleet = 'fleet-a'): InstanceSpec {
  return { name, owner: { fleet, proxy }, credentials: { username: 'u-alpha', password: 's3cret-pw' } };
}

const ours = (fleet: string, proxy: string) => ({ ...MANAGED_LABELS, [FLEET_LABEL]: fleet, [PROXY_LABEL]: proxy });
/** The metadata an instance made by this release with the default lifecycle carries (for seeded instances). */
const current = () => ({ metadata: { items: [{ key: METADATA_POLICY, value: JSON.stringify(proxyEgressPolicy(undefined, undefined)) }] } });
const inserts = () => compute.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/instances'));
const polls = () => compute.requests.filter((r) => r.path.includes('/operations/'));

async function collect(it: AsyncIterable<Instance>): Promise<Instance[]> {
  const out: Instance[] = [];
  for await (const i of it) out.push(i);
  return out;
}

describe('gcp lifecycle: ensure', () => {
  it('inserts a labelled instance with credentials in metadata and polls the operation to DONE', async () => {
    compute.setOperationPolls(2);
    const inst = await lifecycle({ machineType: 'e2-small', port: 8888 }).ensureInstance(spec(), signal());

    const stored = compute.getInstance(ZONE, 'ep-alpha-1234abcd');
    expect(stored?.labels).toEqual(ours('fleet-a', 'alpha'));
    expect(stored?.machineType).toMatch(/\/zones\/us-central1-a\/machineTypes\/e2-small$/);
    const items = (stored?.metadata as { items: { key: string; value: string }[] }).items;
    expect(items).toEqual(
      expect.arrayContaining([
        { key: METADATA_USER, value: 'u-alpha' },
        { key: METADATA_PASSWORD, value: 's3cret-pw' },
      ]),
    );
    expect(JSON.parse(inserts()[0]?.body ?? '{}')).toMatchObject({
      disks: [{ boot: true, initializeParams: { sourceImage: 'projects/egress-images/global/images/family/forward-proxy' } }],
    });
    // RUNNING twice, then DONE: three waits, each routed to the operation's zone.
    expect(polls().map((r) => r.method)).toEqual(['POST', 'POST', 'POST']);
    expect(polls().every((r) => r.path.includes(`/zones/${ZONE}/operations/`) && r.path.endsWith('/wait'))).toBe(true);
    const natIP = stored?.networkInterfaces[0]?.accessConfigs?.[0]?.natIP;
    expect(inst).toMatchObject({
      name: 'ep-alpha-1234abcd',
      id: stored?.id,
      state: 'running',
      placement: ZONE,
      owner: { fleet: 'fleet-a', proxy: 'alpha' },
      endpoint: { host: natIP, port: 8888 },
    });
    expect(natIP).toBeTruthy();
    expect(Date.parse(inst.createdAt)).not.toBeNaN();
  });

  it('inserts from an instance template, stamping only labels, metadata and an explicit machine type', async () => {
    const lc = lifecycle({ image: undefined, instanceTemplate: 'global/instanceTemplates/forward-proxy-v3', machineType: 'e2-small' });
    await lc.ensureInstance(spec(), signal());
    const insert = inserts()[0];
    expect(insert?.query.sourceInstanceTemplate).toBe('global/instanceTemplates/forward-proxy-v3');
    const body = JSON.parse(insert?.body ?? '{}') as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['labels', 'machineType', 'metadata', 'name']);
    expect(compute.getInstance(ZONE, 'ep-alpha-1234abcd')?.labels).toEqual(ours('fleet-a', 'alpha'));
  });

  it('needs exactly one of image and instanceTemplate', () => {
    expect(() => lifecycle({ image: undefined })).toThrow(TypeError);
    expect(() => lifecycle({ instanceTemplate: 'global/instanceTemplates/t' })).toThrow(TypeError);
  });

  it('adopts our instance when the insert answers 409 alreadyExists', async () => {
    const seeded = compute.seedInstance(ZONE, { name: 'ep-alpha-1234abcd', labels: ours('fleet-a', 'alpha') });
    // The first read misses it (as a read racing another worker's insert would).
    compute.injectFault({
      status: 404,
      reason: 'notFound',
      match: { method: 'GET', path: `/compute/v1/projects/egress-test/zones/${ZONE}/instances/ep-alpha-1234abcd` },
    });
    const inst = await lifecycle().ensureInstance(spec(), signal());
    expect(inst.id).toBe(seeded.id);
    expect(inserts().map((r) => r.status)).toEqual([409]);
  });

  it('ends in ProvisioningError with the API message when the insert operation fails with QUOTA_EXCEEDED', async () => {
    compute.failNextOperation({ code: 'QUOTA_EXCEEDED', message: "Quota 'CPUS' exceeded.  Limit: 8.0 in region us-central1." });
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as Error).message).toContain("QUOTA_EXCEEDED: Quota 'CPUS' exceeded.  Limit: 8.0 in region us-central1.");
    expect(compute.listInstances()).toHaveLength(0);
  });

  it('treats ZONE_RESOURCE_POOL_EXHAUSTED the same way', async () => {
    compute.failNextOperation({ code: 'ZONE_RESOURCE_POOL_EXHAUSTED' });
    await expect(lifecycle().ensureInstance({ ...spec(), placement: 'us-central1-b' }, signal())).rejects.toThrow(
      /ZONE_RESOURCE_POOL_EXHAUSTED: The zone does not have enough resources/,
    );
  });

  it('refuses an instance of that name without our labels, and one owned by another proxy', async () => {
    compute.seedInstance(ZONE, { name: 'ep-alpha-1234abcd', labels: { team: 'web' } });
    await expect(lifecycle().ensureInstance(spec(), signal())).rejects.toBeInstanceOf(ProvisioningError);
    compute.seedInstance(ZONE, { name: 'ep-beta', labels: ours('fleet-a', 'beta') });
    await expect(lifecycle().ensureInstance(spec('ep-beta'), signal())).rejects.toThrow(/belongs to proxy "beta"/);
    expect(inserts()).toHaveLength(0);
  });

  it('never logs the credentials', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk, _enc, cb) => void (lines.push(String(chunk)), cb()) });
    const lc = lifecycle({ logger: pino({ level: 'trace' }, sink) });
    await lc.ensureInstance(spec(), signal());
    compute.failNextOperation({ code: 'QUOTA_EXCEEDED' });
    await lc.ensureInstance(spec('ep-other'), signal()).catch(() => undefined);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('')).not.toContain('s3cret-pw');
  });
});

describe('gcp lifecycle: state', () => {
  it('maps Compute statuses to instance states', async () => {
    const lc = lifecycle();
    const cases = [
      ['PROVISIONING', 'provisioning'],
      ['STAGING', 'provisioning'],
      ['RUNNING', 'running'],
      ['STOPPING', 'stopping'],
      ['SUSPENDING', 'stopping'],
      ['STOPPED', 'stopped'],
      ['TERMINATED', 'stopped'],
    ] as const;
    compute.seedInstance(ZONE, { name: 'ep-s', labels: ours('fleet-a', 's') });
    for (const [status, state] of cases) {
      compute.setInstanceStatus(ZONE, 'ep-s', status);
      expect((await lc.getInstance('ep-s', undefined, signal()))?.state).toBe(state);
    }
  });

  it('has no endpoint without an external address, and no instance for a missing name', async () => {
    compute.seedInstance(ZONE, { name: 'ep-internal', labels: ours('fleet-a', 'i') });
    const lc = lifecycle();
    const internal = await lc.getInstance('ep-internal', undefined, signal());
    expect(internal?.state).toBe('running');
    expect(internal?.endpoint).toBeUndefined();
    expect(await lc.getInstance('missing', undefined, signal())).toBeUndefined();
  });
});

describe('gcp lifecycle: delete', () => {
  it('deletes the instance, awaiting the operation; deleting a missing one is no error', async () => {
    const lc = lifecycle();
    await lc.ensureInstance(spec(), signal());
    compute.setOperationPolls(1);
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal());
    expect(compute.getInstance(ZONE, 'ep-alpha-1234abcd')).toBeUndefined();
    expect(await lc.getInstance('ep-alpha-1234abcd', undefined, signal())).toBeUndefined();
    await expect(lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal())).resolves.toBeUndefined();
  });

  it('fails with a retryable error when the delete operation fails', async () => {
    compute.seedInstance(ZONE, { name: 'ep-d', labels: ours('fleet-a', 'd') });
    compute.failNextOperation({ code: 'RESOURCE_IN_USE_BY_ANOTHER_RESOURCE' });
    const err = await lifecycle()
      .deleteInstance('ep-d', undefined, { owner: { fleet: 'fleet-a', proxy: 'd' }, nameIsOurs: true }, signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GcpRequestError);
    expect(err).toMatchObject({ retryable: true, reason: 'RESOURCE_IN_USE_BY_ANOTHER_RESOURCE' });
    expect(compute.getInstance(ZONE, 'ep-d')).toBeDefined();
  });
});

describe('gcp lifecycle: inventory', () => {
  it("pages through the aggregated list across zones and returns exactly the fleet's managed instances", async () => {
    const mine: string[] = [];
    const zones = ['europe-west1-b', 'us-central1-a', 'us-central1-b'];
    for (let i = 0; i < 8; i++) {
      const name = `ep-mine-${i}`;
      mine.push(name);
      compute.seedInstance(zones[i % 3]!, { name, labels: ours('fleet-a', `p${i}`) });
    }
    compute.seedInstance('us-central1-a', { name: 'ep-other-fleet', labels: ours('fleet-b', 'x') });
    compute.seedInstance('us-central1-b', { name: 'ep-unmanaged', labels: { [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'y' } });
    compute.seedInstance('europe-west1-b', { name: 'ep-no-labels' });

    const found = await collect(lifecycle({ pageSize: 3 }).listInstances('fleet-a', signal()));

    expect(found.map((i) => i.name).sort()).toEqual(mine.sort());
    expect(new Set(found.map((i) => i.placement))).toEqual(new Set(zones));
    const lists = compute.requests.filter((r) => r.path.endsWith('/aggregated/instances'));
    expect(lists).toHaveLength(3);
    expect(
      lists.every((r) => r.query.maxResults === '3' && r.query.filter === '(labels.managed-by = "egress-proxies") (labels.egress-fleet = "fleet-a")'),
    ).toBe(true);
    expect(lists.slice(1).every((r) => Boolean(r.query.pageToken))).toBe(true);
  });
});

describe('gcp lifecycle: errors and cancellation', () => {
  it('maps a 400 invalid insert (a bad name) to ProvisioningError', async () => {
    const err = await lifecycle()
      .ensureInstance(spec('Bad_Name'), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as Error).message).toContain('HTTP 400 invalid');
  });

  it('maps a 403 quotaExceeded on the insert call itself to ProvisioningError', async () => {
    compute.injectFault({ status: 403, reason: 'quotaExceeded', message: "Quota 'INSTANCES' exceeded.", match: { method: 'POST' } });
    await expect(lifecycle().ensureInstance(spec(), signal())).rejects.toBeInstanceOf(ProvisioningError);
  });

  it('maps a 403 forbidden to GcpAccessError: not a provisioning failure, not retryable by itself', async () => {
    compute.injectFault({ status: 403, reason: 'forbidden', message: "Required 'compute.instances.create' permission", match: { method: 'POST' } });
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GcpAccessError);
    expect(err).not.toBeInstanceOf(ProvisioningError);
    expect(err).toMatchObject({ status: 403, reason: 'forbidden', retryable: false });
  });

  it('maps 503 backendError and 429 rateLimitExceeded to retryable GcpRequestError', async () => {
    compute.injectFault({ status: 503, match: { method: 'GET' } });
    await expect(lifecycle().getInstance('x', undefined, signal())).rejects.toMatchObject({ status: 503, retryable: true });
    compute.injectFault({ status: 429, reason: 'rateLimitExceeded', match: { method: 'POST' } });
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GcpRequestError);
    expect(err).toMatchObject({ status: 429, reason: 'rateLimitExceeded' });
  });

  it("cancels the HTTP request when the signal ends, rejecting with the signal's reason", async () => {
    compute.injectFault({ latencyMs: 60_000, match: { method: 'GET' } });
    const ac = new AbortController();
    const requested = compute.nextRequest();
    const pending = lifecycle().getInstance('ep-alpha-1234abcd', undefined, ac.signal);
    await requested;
    const aborted = compute.nextClientAbort();
    const reason = new Error('deadline');
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect((await aborted).method).toBe('GET');
  });

  it('stops waiting on an operation when the signal ends', async () => {
    compute.setOperationPolls(1_000_000);
    const ac = new AbortController();
    const lc = lifecycle({ operationPollMs: 10 });
    const pending = lc.ensureInstance(spec(), ac.signal);
    // The insert went out and its operation is being polled.
    for (;;) {
      const r = await compute.nextRequest();
      if (r.path.endsWith('/wait')) break;
    }
    const reason = new Error('deadline');
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });
});

describe('gcp lifecycle: a stopped, suspended or preempted instance is brought back', () => {
  const natOf = (name: string) => compute.getInstance(ZONE, name)?.networkInterfaces[0]?.accessConfigs?.[0]?.natIP;
  const actions = () =>
    compute.requests.filter((r) => r.method === 'POST' && /\/instances\/[^/]+\/(start|resume|stop|suspend)$/.test(r.path)).map((r) => r.path.split('/').at(-1));

  function capture(): { lines: () => Record<string, unknown>[]; logger: Logger } {
    const out: string[] = [];
    const sink = new Writable({ write: (chunk, _enc, cb) => void (out.push(String(chunk)), cb()) });
    return { lines: () => out.map((l) => JSON.parse(l) as Record<string, unknown>), logger: pino({ level: 'info' }, sink) };
  }

  it('starts a preempted spot VM, awaiting the operation, and reports its new address', async () => {
    const { lines, logger } = capture();
    const lc = lifecycle({ logger });
    const made = await lc.ensureInstance(spec(), signal());
    const before = made.endpoint?.host;
    expect(before).toBe(natOf('ep-alpha-1234abcd'));
    compute.preemptInstance(ZONE, 'ep-alpha-1234abcd');
    expect((await lc.getInstance('ep-alpha-1234abcd', undefined, signal()))?.endpoint).toBeUndefined();
    compute.setOperationPolls(2);

    const back = await lc.ensureInstance(spec(), signal());

    expect(actions()).toEqual(['start']);
    expect(
      polls()
        .slice(-3)
        .map((r) => r.path.endsWith('/wait')),
    ).toEqual([true, true, true]);
    expect(compute.getInstance(ZONE, 'ep-alpha-1234abcd')?.status).toBe('RUNNING');
    expect(back).toMatchObject({ state: 'running', id: made.id, endpoint: { host: natOf('ep-alpha-1234abcd'), port: 3128 } });
    expect(back.endpoint?.host).not.toBe(before);
    expect(inserts()).toHaveLength(1);
    const starting = lines().find((l) => l.msg === 'proxy instance is not running; starting it');
    expect(starting).toMatchObject({ instance: 'ep-alpha-1234abcd', status: 'TERMINATED', reason: 'preempted or stopped (spot VM)' });
    expect(lines().some((l) => l.msg === 'proxy instance started' && l.endpoint === back.endpoint?.host)).toBe(true);
  });

  it('starts an instance stopped by hand (through the API), and resumes a suspended one', async () => {
    const { lines, logger } = capture();
    const lc = lifecycle({ logger });
    await lc.ensureInstance(spec(), signal());
    await lc.ensureInstance(spec('ep-beta-1234abcd', 'beta'), signal());
    await clients.instances.stop({ project: 'egress-test', zone: ZONE, instance: 'ep-alpha-1234abcd' });
    await clients.instances.suspend({ project: 'egress-test', zone: ZONE, instance: 'ep-beta-1234abcd' });
    compute.state.finishAllOperations();
    expect([compute.getInstance(ZONE, 'ep-alpha-1234abcd')?.status, compute.getInstance(ZONE, 'ep-beta-1234abcd')?.status]).toEqual([
      'TERMINATED',
      'SUSPENDED',
    ]);

    expect((await lc.ensureInstance(spec(), signal())).state).toBe('running');
    const beta = await lc.ensureInstance(spec('ep-beta-1234abcd', 'beta'), signal());
    expect(beta.state).toBe('running');
    expect(beta.endpoint?.host).toBe(natOf('ep-beta-1234abcd'));
    expect(actions()).toEqual(['stop', 'suspend', 'start', 'resume']);
    expect(
      lines()
        .filter((l) => typeof l.reason === 'string')
        .map((l) => [l.instance, l.reason]),
    ).toEqual([
      ['ep-alpha-1234abcd', 'stopped'],
      ['ep-beta-1234abcd', 'suspended'],
    ]);
  });

  it('looks again later at an instance still STOPPING or SUSPENDING, without a call', async () => {
    compute.seedInstance(ZONE, { name: 'ep-s', labels: ours('fleet-a', 's'), ...current() });
    const lc = lifecycle();
    for (const status of ['STOPPING', 'SUSPENDING'] as const) {
      compute.setInstanceStatus(ZONE, 'ep-s', status);
      const inst = await lc.ensureInstance(spec('ep-s', 's'), signal());
      expect(inst.state).toBe('provisioning');
      expect(inst.message).toContain(status);
    }
    expect(compute.requests.every((r) => r.method === 'GET')).toBe(true);
  });

  it('a start that fails is retryable (the instance exists); a foreign stopped instance is never started', async () => {
    compute.seedInstance(ZONE, { name: 'ep-spot', labels: ours('fleet-a', 'spot'), status: 'TERMINATED', ...current() });
    compute.failNextOperation({ code: 'ZONE_RESOURCE_POOL_EXHAUSTED' });
    const err = await lifecycle()
      .ensureInstance(spec('ep-spot', 'spot'), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GcpRequestError);
    expect(err).not.toBeInstanceOf(ProvisioningError);
    expect(err).toMatchObject({ retryable: true, reason: 'ZONE_RESOURCE_POOL_EXHAUSTED' });
    expect(compute.getInstance(ZONE, 'ep-spot')?.status).toBe('TERMINATED');
    // A 400 resourceNotReady (the state changed under us) is retryable too.
    compute.injectFault({ status: 400, reason: 'resourceNotReady', match: { method: 'POST' } });
    await expect(lifecycle().ensureInstance(spec('ep-spot', 'spot'), signal())).rejects.toMatchObject({ retryable: true, status: 400 });
    expect((await lifecycle().ensureInstance(spec('ep-spot', 'spot'), signal())).state).toBe('running');

    compute.seedInstance(ZONE, { name: 'ep-theirs', labels: { team: 'web' }, status: 'TERMINATED' });
    await expect(lifecycle().ensureInstance(spec('ep-theirs', 'x'), signal())).rejects.toBeInstanceOf(ProvisioningError);
    expect(compute.getInstance(ZONE, 'ep-theirs')?.status).toBe('TERMINATED');
    expect(actions()).toEqual(['start', 'start', 'start']);
  });
});

describe('gcp lifecycle: egress policy', () => {
  const guards = egressGuards({ redisUrl: 'redis://:pw@127.0.0.1:46379', api: { host: '127.0.0.1', port: 8080 }, echoUrl: 'http://127.0.0.1:8080/v1/echo' });
  const policyOf = (allow: string[]): ProxyEgressPolicy => proxyEgressPolicy({ allow, deny: ['192.0.2.0/24'] }, guards);
  const itemsOf = (name = 'ep-alpha-1234abcd') => Object.fromEntries((compute.getInstance(ZONE, name)?.metadata.items ?? []).map((i) => [i.key, i.value]));
  const setMetadata = () => compute.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/setMetadata'));
  const writes = () => compute.requests.filter((r) => r.method !== 'GET' && !r.path.includes('/operations/'));

  it("the provider sets its proxies.egressPolicy and the process's guarded listeners as metadata egress-proxy-policy at insert", async () => {
    const config = gcpProviderSchema.parse({
      name: 'gce',
      type: 'gcp',
      project: 'egress-test',
      zone: ZONE,
      proxies: { image: 'projects/p/global/images/family/fp', egressPolicy: { allow: ['10.20.0.0/16'], deny: ['192.0.2.0/24'] } },
    });
    const auth = new OAuth2Client();
    auth.setCredentials({ access_token: 'good-token', expiry_date: Date.now() + 3_600_000 });
    const provider = createGcpProvider(
      config,
      { logger: silentLogger(), registry: new Registry(), dataDir: '/nonexistent', egress: guards },
      { clients: createComputeClients({ ...compute.clientOptions(), authClient: auth }) },
    );
    try {
      await provider.lifecycle?.ensureInstance(spec(), signal());
    } finally {
      await provider.close();
    }
    expect(itemsOf()[METADATA_POLICY]).toBe(JSON.stringify(policyOf(['10.20.0.0/16'])));
    expect(JSON.parse(itemsOf()[METADATA_POLICY] ?? '')).toEqual({
      version: 1,
      allow: ['10.20.0.0/16'],
      deny: ['192.0.2.0/24'],
      guarded: [
        { host: '127.0.0.1', port: 46379, role: 'redis' },
        { host: '127.0.0.1', port: 8080, role: 'api' },
      ],
      echo: { host: '127.0.0.1', port: 8080, path: '/v1/echo' },
    });
    expect(setMetadata()).toHaveLength(0);
  });

  it('a changed policy is written to the running instance with setMetadata under its fingerprint, keeping the other items; no restart, no replacement', async () => {
    const made = await lifecycle({ egressPolicy: policyOf(['10.20.0.0/16']) }).ensureInstance(spec(), signal());
    const fingerprint = compute.getInstance(ZONE, 'ep-alpha-1234abcd')?.metadata.fingerprint;
    compute.setOperationPolls(1);

    const lc = lifecycle({ egressPolicy: policyOf(['10.20.0.0/16', '172.16.5.0/24']) });
    const after = await lc.ensureInstance(spec(), signal());

    expect(setMetadata()).toHaveLength(1);
    expect(JSON.parse(setMetadata()[0]?.body ?? '{}')).toMatchObject({ fingerprint });
    // The change is applied once its operation is DONE (awaited: the instance reads the new value at once).
    expect(JSON.parse(itemsOf()[METADATA_POLICY] ?? '').allow).toEqual(['10.20.0.0/16', '172.16.5.0/24']);
    expect(itemsOf()).toMatchObject({ [METADATA_USER]: 'u-alpha', [METADATA_PASSWORD]: 's3cret-pw', [METADATA_PORT]: '3128' });
    expect(after).toMatchObject({ id: made.id, state: 'running', endpoint: made.endpoint });
    expect(writes().map((r) => r.path.split('/').at(-1))).toEqual(['instances', 'setMetadata']);

    // Settled: the next looks only read.
    const requests = compute.requests.length;
    await lc.ensureInstance(spec(), signal());
    expect(compute.requests.slice(requests).map((r) => r.method)).toEqual(['GET']);
  });

  it('an unchanged policy writes nothing, also from a restarted worker that builds the same document again', async () => {
    await lifecycle({ egressPolicy: policyOf(['10.20.0.0/16']) }).ensureInstance(spec(), signal());
    const requests = compute.requests.length;
    const again = egressGuards({ redisUrl: 'redis://:pw@127.0.0.1:46379', api: { host: '127.0.0.1', port: 8080 }, echoUrl: 'http://127.0.0.1:8080/v1/echo' });
    const lc = lifecycle({ egressPolicy: proxyEgressPolicy({ allow: ['10.20.0.0/16'], deny: ['192.0.2.0/24'] }, again) });
    for (let i = 0; i < 3; i++) expect((await lc.ensureInstance(spec(), signal())).state).toBe('running');
    expect(compute.requests.slice(requests).every((r) => r.method === 'GET')).toBe(true);
  });

  it('an instance from before the policy gains the item; a stopped one gets it before it is started', async () => {
    compute.seedInstance(ZONE, {
      name: 'ep-old',
      labels: ours('fleet-a', 'old'),
      metadata: {
        items: [
          { key: METADATA_PORT, value: '3128' },
          { key: 'startup-script', value: 'echo hi' },
        ],
      },
    });
    compute.seedInstance(ZONE, { name: 'ep-stopped', labels: ours('fleet-a', 'stopped'), status: 'TERMINATED' });
    const lc = lifecycle({ egressPolicy: policyOf([]) });
    await lc.ensureInstance(spec('ep-old', 'old'), signal());
    expect(itemsOf('ep-old')).toEqual({ [METADATA_PORT]: '3128', 'startup-script': 'echo hi', [METADATA_POLICY]: JSON.stringify(policyOf([])) });
    expect((await lc.ensureInstance(spec('ep-stopped', 'stopped'), signal())).state).toBe('running');
    expect(itemsOf('ep-stopped')[METADATA_POLICY]).toBe(JSON.stringify(policyOf([])));
    expect(writes().map((r) => r.path.split('/').slice(-2).join('/'))).toEqual(['ep-old/setMetadata', 'ep-stopped/setMetadata', 'ep-stopped/start']);
  });

  it('a metadata change racing ours (412 conditionNotMet) is retryable and the next ensure reads again; a foreign instance is never written', async () => {
    await lifecycle().ensureInstance(spec(), signal());
    const lc = lifecycle({ egressPolicy: policyOf(['10.20.0.0/16']) });
    compute.injectFault({ status: 412, reason: 'conditionNotMet', match: { method: 'POST', path: /\/setMetadata$/ } });
    const err = await lc.ensureInstance(spec(), signal()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GcpRequestError);
    expect(err).toMatchObject({ retryable: true, status: 412 });
    await lc.ensureInstance(spec(), signal());
    expect(JSON.parse(itemsOf()[METADATA_POLICY] ?? '').allow).toEqual(['10.20.0.0/16']);

    compute.seedInstance(ZONE, { name: 'ep-theirs', labels: { team: 'web' } });
    await expect(lc.ensureInstance(spec('ep-theirs', 'x'), signal())).rejects.toBeInstanceOf(ProvisioningError);
    expect(compute.getInstance(ZONE, 'ep-theirs')?.metadata.items).toBeUndefined();
    expect(setMetadata().map((r) => r.status)).toEqual([412, 200]);
  });
});

describe('gcp lifecycle: the managed firewall rule', () => {
  const RULE = 'egress-proxies-gce-allow';
  const TAG = 'egress-proxy-gce';
  const withFirewall = (o: Partial<GcpLifecycleOptions> = {}) =>
    lifecycle({ provider: 'gce', firewall: { sourceRanges: ['203.0.113.0/24', '2001:db8::/32'] }, ...o });
  const firewallCalls = () => compute.requests.filter((r) => r.path.includes('/global/')).map((r) => `${r.method} ${r.path.replace(/operation-[^/]+/, 'OP')}`);
  const base = '/compute/v1/projects/egress-test/global';

  it('creates the rule before the first insert, once per process, and tags every instance', async () => {
    compute.setOperationPolls(1);
    const lc = withFirewall({ port: 8888 });
    await lc.ensureInstance(spec(), signal());
    await lc.ensureInstance(spec('ep-beta-1234abcd', 'beta'), signal());

    expect(compute.getFirewall(RULE)).toMatchObject({
      network: `${compute.url}${base}/networks/default`,
      direction: 'INGRESS',
      sourceRanges: ['203.0.113.0/24', '2001:db8::/32'],
      targetTags: [TAG],
      allowed: [{ IPProtocol: 'tcp', ports: ['8888'] }],
    });
    expect(compute.getFirewall(RULE)?.description).toMatch(/^Managed by egress-proxies for provider "gce"/);
    expect(firewallCalls()).toEqual([
      `GET ${base}/firewalls/${RULE}`,
      `POST ${base}/firewalls`,
      `POST ${base}/operations/OP/wait`,
      `POST ${base}/operations/OP/wait`,
    ]);
    // The rule was in place before the first instance insert.
    const firstInsert = compute.requests.findIndex((r) => r.method === 'POST' && r.path.endsWith('/instances'));
    expect(compute.requests.findIndex((r) => r.path === `${base}/firewalls` && r.method === 'POST')).toBeLessThan(firstInsert);
    for (const name of ['ep-alpha-1234abcd', 'ep-beta-1234abcd']) expect(compute.getInstance(ZONE, name)?.tags).toEqual({ items: [TAG] });
  });

  it('tags instances made from a template too, and keeps configured network tags next to the tag', async () => {
    await withFirewall({ networkTags: ['web'] }).ensureInstance(spec(), signal());
    expect(compute.getInstance(ZONE, 'ep-alpha-1234abcd')?.tags).toEqual({ items: ['web', TAG] });
    await withFirewall({ image: undefined, instanceTemplate: 'global/instanceTemplates/t' }).ensureInstance(spec('ep-t', 't'), signal());
    expect(JSON.parse(inserts()[1]?.body ?? '{}').tags).toEqual({ items: [TAG] });
  });

  it('patches a rule that drifted back to the port and ranges, and leaves a rule in place alone', async () => {
    compute.seedFirewall({ name: RULE, sourceRanges: ['0.0.0.0/0'], targetTags: [TAG], allowed: [{ IPProtocol: 'tcp', ports: ['8080'] }], disabled: true });
    await withFirewall().ensureInstance(spec(), signal());
    const patch = compute.requests.find((r) => r.method === 'PATCH');
    expect(patch?.path).toBe(`${base}/firewalls/${RULE}`);
    expect(JSON.parse(patch?.body ?? '{}')).toMatchObject({
      sourceRanges: ['203.0.113.0/24', '2001:db8::/32'],
      allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }],
      targetTags: [TAG],
    });
    expect(compute.getFirewall(RULE)).toMatchObject({
      sourceRanges: ['203.0.113.0/24', '2001:db8::/32'],
      allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }],
      disabled: false,
    });

    compute.requests.length = 0;
    await withFirewall().ensureInstance(spec('ep-beta-1234abcd', 'beta'), signal());
    expect(firewallCalls()).toEqual([`GET ${base}/firewalls/${RULE}`]);
  });

  it('takes 409 alreadyExists as success (another worker made the rule)', async () => {
    compute.seedFirewall({
      name: RULE,
      sourceRanges: ['203.0.113.0/24', '2001:db8::/32'],
      targetTags: [TAG],
      allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }],
    });
    compute.injectFault({ status: 404, reason: 'notFound', match: { method: 'GET', path: `${base}/firewalls/${RULE}` } });
    await withFirewall().ensureInstance(spec(), signal());
    expect(compute.requests.filter((r) => r.path === `${base}/firewalls`).map((r) => r.status)).toEqual([409]);
    expect(inserts().map((r) => r.status)).toEqual([200]);
  });

  it('shares one attempt between concurrent creates', async () => {
    compute.setOperationPolls(2);
    const lc = withFirewall();
    await Promise.all(['a', 'b', 'c'].map((p) => lc.ensureInstance(spec(`ep-${p}`, p), signal())));
    expect(firewallCalls().filter((c) => !c.includes('/operations/'))).toEqual([`GET ${base}/firewalls/${RULE}`, `POST ${base}/firewalls`]);
    expect(inserts()).toHaveLength(3);
  });

  it('fails the create with a ProvisioningError for an invalid rule, and tries again after any failure', async () => {
    const bad = await withFirewall({ firewall: { sourceRanges: ['10.0.0.0/33'] } })
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(ProvisioningError);
    expect((bad as Error).message).toContain('resource.sourceRanges[0]');
    expect(inserts()).toHaveLength(0);

    const lc = withFirewall();
    compute.injectFault({ status: 503, match: { method: 'GET', path: `${base}/firewalls/${RULE}` } });
    await expect(lc.ensureInstance(spec(), signal())).rejects.toMatchObject({ retryable: true, status: 503 });
    expect(inserts()).toHaveLength(0);
    await lc.ensureInstance(spec(), signal());
    expect(compute.getFirewall(RULE)).toBeDefined();
    expect(inserts()).toHaveLength(1);
  });

  it('a caller that gives up does not fail another one waiting on the same attempt', async () => {
    const ensurer = createFirewallEnsurer({
      clients,
      project: 'egress-test',
      settings: { provider: 'gce', sourceRanges: ['203.0.113.0/24'], network: 'global/networks/default', port: 3128 },
      logger: silentLogger(),
      operationPollMs: 0,
    });
    compute.injectFault({ latencyMs: 60_000, match: { method: 'GET', path: `${base}/firewalls/${RULE}` } });
    const held = compute.nextRequest();
    const impatient = new AbortController();
    // Both join one attempt (started by the first call, under its signal).
    const first = ensurer.ensure(impatient.signal);
    const second = ensurer.ensure(new AbortController().signal);
    await held;
    const aborted = compute.nextClientAbort();
    impatient.abort(new Error('gave up'));
    await expect(first).rejects.toThrow('gave up');
    await aborted;
    await second;
    expect(compute.getFirewall(RULE)).toBeDefined();
    expect(compute.requests.filter((r) => r.method === 'GET').map((r) => r.outcome)).toEqual(['client-aborted', 'served']);
    // Remembered: no further request.
    const before = compute.requests.length;
    await ensurer.ensure(new AbortController().signal);
    expect(compute.requests).toHaveLength(before);
  });

  it('refuses a rule of that name on another network', async () => {
    compute.state.networks.add('other');
    compute.seedFirewall({ name: RULE, network: `${compute.url}${base}/networks/other`, allowed: [{ IPProtocol: 'tcp', ports: ['3128'] }] });
    await expect(withFirewall().ensureInstance(spec(), signal())).rejects.toThrow(/exists on network "other", not "default"/);
    expect(compute.requests.some((r) => r.method === 'PATCH')).toBe(false);
  });

  it('never removes the rule when proxies are deleted', async () => {
    const lc = withFirewall();
    await lc.ensureInstance(spec(), signal());
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal());
    expect(compute.getInstance(ZONE, 'ep-alpha-1234abcd')).toBeUndefined();
    expect(compute.getFirewall(RULE)).toBeDefined();
    expect(compute.requests.some((r) => r.method === 'DELETE' && r.path.includes('/firewalls/'))).toBe(false);
  });

  it('keeps names within 63 characters for long provider names', () => {
    const long = 'p'.repeat(40) + '-' + 'q'.repeat(22);
    for (const name of [firewallRuleName(long), proxyNetworkTag(long)]) {
      expect(name.length).toBeLessThanOrEqual(63);
      expect(name).toMatch(/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/);
    }
    expect(firewallRuleName(long)).not.toBe(firewallRuleName(`${long.slice(0, -1)}r`));
    expect(firewallRuleName('gce')).toBe(RULE);
  });

  it('validates the configuration, naming the field', () => {
    const doc = (firewall: unknown) => ({ providers: [{ name: 'gce', type: 'gcp', project: 'p', proxies: { image: 'i', firewall } }] });
    expect(() => parseConfigDocument(doc({ sourceRanges: [] }), 'egress.yaml')).toThrow(
      /providers\[0\]\.proxies\.firewall\.sourceRanges: give at least one address range/,
    );
    expect(() => parseConfigDocument(doc({ sourceRanges: ['10.0.0.0/8', '10.0.0.0/40'] }), 'egress.yaml')).toThrow(
      /providers\[0\]\.proxies\.firewall\.sourceRanges\[1\]: expected an address range in CIDR notation/,
    );
    expect(() => parseConfigDocument(doc({}), 'egress.yaml')).toThrow(/providers\[0\]\.proxies\.firewall\.sourceRanges/);
    const ok = parseConfigDocument(doc({ sourceRanges: ['203.0.113.7', '2001:db8::/32'], network: 'global/networks/crawl' }), 'egress.yaml');
    expect(ok.providers[0]).toMatchObject({ proxies: { firewall: { sourceRanges: ['203.0.113.7', '2001:db8::/32'], network: 'global/networks/crawl' } } });
  });
});
