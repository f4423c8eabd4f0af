import type { IncomingMessage } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Job } from 'bullmq';
import { Redis } from 'ioredis';
import { OAuth2Client } from 'google-auth-library';
import { Server as ProxyServer } from 'proxy-chain';
import { afterAll, afterEach, beforeAll, describe, expect, inject, test } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { sweepProvider } from '../../src/proxies/gc.ts';
import { instanceNameFor } from '../../src/proxies/instance-name.ts';
import { BullmqWorkRequests } from '../../src/jobs/bullmq-work-requests.ts';
import { createComputeClients, MANAGED_LABELS, type ComputeClients } from '../../src/providers/gcp/index.ts';
import { createGcpLifecycle, firewallRuleName, FLEET_LABEL, METADATA_PASSWORD, METADATA_USER, PROXY_LABEL } from '../../src/providers/gcp/lifecycle.ts';
import type { Instance, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { startFakeCompute, type ComputeFault, type ComputeRequest, type FakeCompute, type FakeInstance } from '../fakes/compute/index.ts';
import type { EgressProcess } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { activeJobOf, startProcessCluster, withLogs, type ProcessCluster } from '../support/process-cluster.ts';
import { waitFor } from '../support/wait.ts';

// "A worker killed with SIGKILL in the middle of a create, the job taken over by another worker:
// exactly one instance per proxy, and the proxy becomes Ready" — on the gcp provider, against the
// fake Compute API in this process. Every role is its own process (`egress api`, `egress worker`)
// sharing the run's Redis under a fresh prefix. The test plays the VMs: one real forward proxy that
// listens on every loopback address and accepts, on the address the fake handed an instance as its
// external IP, exactly the credentials in that RUNNING instance's metadata.
//
// No step waits on time: each waits on an event (the fake seeing a request, a client abort, a log
// line, a job being active in Redis) or polls state with waitFor.
//
// Both workers are warmed up (one proxy made and Ready) before the job under test reaches them: a
// worker's first gcp call builds the Compute clients, which loads protos synchronously (~0.7 s idle,
// seconds on a loaded machine). Blocked that long with a short lock, a worker's own stalled check
// takes the job back and runs it a second time in the same process: an insert not held by the fake.
// The doomed worker runs one job at a time, so the rescuer's warm-up goes to the rescuer.
const LOCKS = ['--lock-duration', '2s', '--stalled-interval', '500ms'];
const PROJECT = 'egress-test';
const ZONE = 'us-central1-a';
const INSTANCES = `/compute/v1/projects/${PROJECT}/zones/${ZONE}/instances`;
const PROVIDER = 'gce';

interface Cluster extends ProcessCluster {
  /** Starts `egress worker` on the reconcile queue with the test's locks. */
  worker(extra?: string[]): EgressProcess;
}

async function startCluster(configYaml: string): Promise<Cluster> {
  const c = await startProcessCluster(configYaml);
  return { ...c, worker: (extra = []) => c.start(['worker', ...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo, ...extra]) };
}

/** Resolves with the next request the fake sees that `matches` (registered now, before the trigger). */
function nextRequest(compute: FakeCompute, matches: (r: ComputeRequest) => boolean): Promise<ComputeRequest> {
  return new Promise((resolve) => {
    const onRequest = (r: ComputeRequest): void => {
      if (matches(r)) {
        compute.off('request', onRequest);
        resolve(r);
      }
    };
    compute.on('request', onRequest);
  });
}

const metadataOf = (i: FakeInstance, key: string): string | undefined =>
  (i.metadata as { items?: { key: string; value: string }[] } | undefined)?.items?.find((m) => m.key === key)?.value;
const natIpOf = (i: FakeInstance): string | undefined => i.networkInterfaces[0]?.accessConfigs?.[0]?.natIP;

describe('crash safety on the gcp provider (fake Compute API; the test plays the VMs)', () => {
  let c: Cluster;
  let compute: FakeCompute;
  let vm: ProxyServer;
  let dir: string;
  let nextHost = 2;

  beforeAll(async () => {
    // Every external address is a loopback address of its own, so a new address after a start is visible.
    compute = await startFakeCompute({ project: PROJECT, tokens: ['gcp-token'], externalIps: () => `127.0.0.${nextHost++}` });
    vm = new ProxyServer({
      port: 0,
      prepareRequestFunction: ({ username, password, request }: { username: string; password: string; request: IncomingMessage }) => {
        const local = (request.socket.localAddress ?? '').replace(/^::ffff:/, '');
        const inst = compute.listInstances().find((i) => i.status === 'RUNNING' && natIpOf(i) === local);
        const ok = inst !== undefined && metadataOf(inst, METADATA_USER) === username && metadataOf(inst, METADATA_PASSWORD) === password;
        return { requestAuthentication: !ok };
      },
    });
    await vm.listen();
    dir = await mkdtemp(join(tmpdir(), 'egress-crash-gcp-'));
    await writeFile(join(dir, 'gcp-token'), 'gcp-token\n');
    const provider = {
      name: PROVIDER,
      type: 'gcp',
      project: PROJECT,
      zone: ZONE,
      accessTokenFile: join(dir, 'gcp-token'),
      apiEndpoint: '127.0.0.1',
      port: compute.port,
      protocol: 'http',
      proxies: { image: 'projects/egress/global/images/family/forward-proxy', port: vm.port, firewall: { sourceRanges: ['127.0.0.0/8'] } },
    };
    c = await startCluster(`providers:\n  - ${JSON.stringify(provider)}\n`);
  }, 60_000);
  afterEach(async () => {
    // Whatever a test held: operations complete from now on, so deletes finish.
    compute.setOperationPolls(0);
    compute.state.finishAllOperations();
    const { items } = (await (await fetch(`${c.api}/v1/proxies`)).json()) as { items: ProxyView[] };
    for (const p of items) await fetch(`${c.api}/v1/proxies/${p.name}`, { method: 'DELETE' });
    await withLogs(c.workers, () =>
      waitFor('every proxy gone', async () => ((await (await fetch(`${c.api}/v1/proxies`)).json()) as { items: unknown[] }).items.length === 0, 30_000),
    );
    const workers = c.workers.splice(0);
    const codes = await Promise.all(workers.map((w) => w.stop()));
    expect(codes.filter((code) => code !== 0 && code !== null)).toEqual([]);
    expect(compute.listInstances()).toEqual([]);
    // Deleting proxies never removes the provider's firewall rule.
    expect(compute.listFirewalls().map((f) => f.name)).toEqual([firewallRuleName(PROVIDER)]);
  }, 60_000);
  afterAll(async () => {
    await c?.close();
    await vm?.close(true);
    await compute?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const isInsert = (r: ComputeRequest): boolean => r.method === 'POST' && r.path === INSTANCES;
  const nameOf = (r: ComputeRequest): string => (JSON.parse(r.body) as { name: string }).name;

  /** Waits for the proxy to be Ready and checks it has exactly one instance, the one served. */
  async function expectOneInstanceReady(name: string): Promise<ProxyView> {
    const ready = await withLogs(c.workers, () =>
      waitFor(
        `${name} to be Ready`,
        async () => {
          const p = await c.proxy(name);
          return p?.status.phase === 'Ready' ? p : undefined;
        },
        30_000,
      ),
    );
    const mine = compute.listInstances().filter((i) => i.labels?.[PROXY_LABEL] === name);
    expect(mine.map((i) => i.name)).toEqual([ready.status.instanceName]);
    const [inst] = mine;
    expect(ready.status).toMatchObject({ instanceId: inst?.id, url: `http://${natIpOf(inst!)}:${vm.port}`, egressIp: '127.0.0.1' });
    expect(inst?.tags).toEqual({ items: [`egress-proxy-${PROVIDER}`] });
    return ready;
  }

  /** Applies a throwaway proxy and waits for it to be Ready: the worker that takes it is warm. */
  async function warmUp(name: string): Promise<void> {
    await c.apply(`metadata: { name: ${name} }\nspec: { provider: ${PROVIDER}, placement: ${ZONE} }\n`);
    await expectOneInstanceReady(name);
  }

  /**
   * Starts a warm worker that runs one job at a time, makes the fake `hold` a request, applies the
   * proxy and, once the fake has seen `held` (the worker is then inside the create, its job active), starts and warms the rescuer and
   * kills the first worker with SIGKILL. The rescuer then takes the job over.
   */
  async function crashInsideCreate(
    name: string,
    hold: ComputeFault,
    held: (r: ComputeRequest) => boolean,
  ): Promise<{ job: Job; rescuer: EgressProcess; request: ComputeRequest }> {
    const doomed = c.worker(['--concurrency', '1']);
    await doomed.waitForLog('worker started');
    await warmUp(`warm-d-${name}`);
    compute.injectFault(hold);
    const seen = nextRequest(compute, held);
    await c.apply(`metadata: { name: ${name} }\nspec: { provider: ${PROVIDER}, placement: ${ZONE} }\n`);
    const job = await activeJobOf(c.reconcile, name);
    const request = await seen;
    // The doomed worker is busy with that one job, so the warm-up goes to the rescuer.
    const rescuer = c.worker();
    await warmUp(`warm-r-${name}`);
    expect(rescuer.logs()).toContain(`"proxy":"warm-r-${name}"`);
    const aborted = request.outcome === 'pending' ? compute.nextClientAbort() : undefined;
    doomed.child.kill('SIGKILL');
    expect(await doomed.exited).toBe(null);
    if (aborted) expect((await aborted).path).toBe(request.path);
    // It died inside the create: it never concluded anything about the proxy.
    expect(
      doomed
        .logs()
        .split('\n')
        .filter((l) => l.includes(`"proxy":"${name}"`) && l.includes('reconciled proxy')),
    ).toEqual([]);
    return { job, rescuer, request };
  }

  async function expectTakenOver(job: Job, rescuer: EgressProcess): Promise<void> {
    expect(rescuer.logs()).toContain(`"jobId":"${job.id}"`);
    expect((await c.reconcile.getJob(job.id ?? ''))?.stalledCounter).toBe(1);
  }

  test('killed while the insert is held and never applied: the next worker makes the one instance', async () => {
    const { job, rescuer, request } = await crashInsideCreate('held-1', { latencyMs: 120_000, match: { method: 'POST', path: INSTANCES } }, isInsert);
    expect(compute.listInstances().filter((i) => i.labels?.[PROXY_LABEL] === 'held-1')).toEqual([]);

    const ready = await expectOneInstanceReady('held-1');
    // The same deterministic name both times, and one insert that made something.
    expect(nameOf(request)).toBe(ready.status.instanceName);
    const sameName = compute.requests.filter((r) => isInsert(r) && nameOf(r) === ready.status.instanceName);
    expect(sameName.map((r) => (r.outcome === 'served' ? r.status : r.outcome))).toEqual(['client-aborted', 200]);
    await expectTakenOver(job, rescuer);
  });

  test('killed while the insert was applied but its answer held: the next worker adopts that instance', async () => {
    const { job, rescuer } = await crashInsideCreate(
      'applied-1',
      { latencyMs: 120_000, afterApply: true, match: { method: 'POST', path: INSTANCES } },
      isInsert,
    );
    const made = compute.listInstances().filter((i) => i.labels?.[PROXY_LABEL] === 'applied-1');
    expect(made.map((i) => i.status)).toEqual(['PROVISIONING']);
    // Compute finishes the boot on its own; nobody polls the dead worker's operation.
    compute.state.finishAllOperations();

    const ready = await expectOneInstanceReady('applied-1');
    expect(ready.status.instanceId).toBe(made[0]?.id);
    // The only insert of that name is the one whose answer never came.
    expect(compute.requests.filter((r) => isInsert(r) && nameOf(r) === ready.status.instanceName).map((r) => r.outcome)).toEqual(['client-aborted']);
    await expectTakenOver(job, rescuer);
  });

  test('killed while it awaits the zone operation: the next worker adopts the instance once it runs', async () => {
    // The insert is applied and answered; the worker's wait on the zone operation is held.
    const WAIT = new RegExp(`^/compute/v1/projects/${PROJECT}/zones/${ZONE}/operations/[^/]+/wait$`);
    const { job, rescuer } = await crashInsideCreate(
      'waiting-1',
      { latencyMs: 120_000, match: { method: 'POST', path: WAIT } },
      (r) => r.method === 'POST' && WAIT.test(r.path),
    );
    const made = compute.listInstances().filter((i) => i.labels?.[PROXY_LABEL] === 'waiting-1');
    expect(made.map((i) => i.status)).toEqual(['PROVISIONING']);
    // Compute finishes the boot on its own; nobody polls the dead worker's operation.
    compute.state.finishAllOperations();

    const ready = await expectOneInstanceReady('waiting-1');
    expect(ready.status.instanceId).toBe(made[0]?.id);
    expect(compute.requests.filter((r) => isInsert(r) && nameOf(r) === ready.status.instanceName).map((r) => r.status)).toEqual([200]);
    await expectTakenOver(job, rescuer);
  });

  test('a preempted VM is started again and the proxy is Ready at its new address', async () => {
    c.worker();
    await warmUp('warm-spot');
    await c.apply(`metadata: { name: spot-1 }\nspec: { provider: ${PROVIDER}, placement: ${ZONE} }\n`);
    const first = await expectOneInstanceReady('spot-1');
    const name = first.status.instanceName ?? '';
    compute.preemptInstance(ZONE, name);
    const started = nextRequest(compute, (r) => r.method === 'POST' && r.path === `${INSTANCES}/${name}/start`);
    await new BullmqWorkRequests({ reconcile: c.reconcile }).reconcileProxy('spot-1');
    await started;
    const again = await withLogs(c.workers, () =>
      waitFor(
        'spot-1 Ready at a new address',
        async () => {
          const p = await c.proxy('spot-1');
          return p?.status.phase === 'Ready' && p.status.url !== first.status.url ? p : undefined;
        },
        30_000,
      ),
    );
    expect(again.status.instanceId).toBe(first.status.instanceId);
    await expectOneInstanceReady('spot-1');
    expect(c.workers[0]?.logs()).toContain('"reason":"preempted or stopped (spot VM)"');
  });
});

describe('garbage collection on the gcp provider', () => {
  let compute: FakeCompute;
  let clients: ComputeClients;
  let lifecycle: ProxyLifecycle;
  let redis: Redis;
  let store: RedisProxyStore;
  const fleet = 'gc-gcp';
  const signal = (): AbortSignal => AbortSignal.timeout(30_000);
  const ours = (proxy: string, f = fleet) => ({ ...MANAGED_LABELS, [FLEET_LABEL]: f, [PROXY_LABEL]: proxy });

  beforeAll(async () => {
    compute = await startFakeCompute({ project: PROJECT, tokens: ['gcp-token'] });
    const auth = new OAuth2Client();
    auth.setCredentials({ access_token: 'gcp-token', expiry_date: Date.now() + 3_600_000 });
    clients = createComputeClients({ ...compute.clientOptions(), authClient: auth });
    lifecycle = createGcpLifecycle({
      clients,
      project: PROJECT,
      zone: ZONE,
      image: 'projects/egress/global/images/family/forward-proxy',
      logger: silentLogger(),
      operationPollMs: 0,
    });
    redis = new Redis(inject('redisUrl'));
    store = new RedisProxyStore(redis, uniquePrefix());
  });
  afterAll(async () => {
    await store?.close();
    redis?.disconnect();
    await clients?.close();
    await compute?.close();
  });

  test('never deletes an instance younger than the grace period, nor one without our labels or of another fleet', async () => {
    const { proxy } = await store.apply({ metadata: { name: 'kept', labels: {} }, spec: { provider: PROVIDER } });
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    compute.seedInstance(ZONE, { name: instanceNameFor(fleet, proxy), labels: ours('kept'), creationTimestamp: hourAgo });
    compute.seedInstance(ZONE, { name: 'ep-ghost-old', labels: ours('ghost'), creationTimestamp: hourAgo });
    compute.seedInstance('europe-west1-b', { name: 'ep-ghost-young', labels: ours('ghost') });
    // Our fleet and proxy labels but not managed-by, an unlabelled VM, another fleet's: never seen, never touched.
    compute.seedInstance(ZONE, { name: 'ep-unmanaged', labels: { [FLEET_LABEL]: fleet, [PROXY_LABEL]: 'ghost' }, creationTimestamp: hourAgo });
    compute.seedInstance(ZONE, { name: 'web-server', creationTimestamp: hourAgo });
    compute.seedInstance(ZONE, { name: 'ep-theirs', labels: ours('ghost', 'other-fleet'), creationTimestamp: hourAgo });

    const deps = { proxies: store, fleet, graceMs: 10 * 60_000, logger: silentLogger() };
    const result = await sweepProvider(PROVIDER, lifecycle, deps, signal());

    expect(result).toMatchObject({ seen: 3, kept: 1, young: 1, deleted: [{ name: 'ep-ghost-old', reason: 'no-proxy' }] });
    expect(
      compute
        .listInstances()
        .map((i) => i.name)
        .sort(),
    ).toEqual(['ep-ghost-young', 'ep-theirs', 'ep-unmanaged', instanceNameFor(fleet, proxy), 'web-server'].sort());
    expect(compute.requests.filter((r) => r.method === 'DELETE').map((r) => r.path)).toEqual([`${INSTANCES}/ep-ghost-old`]);

    // Once the young one is past the grace period it goes too; the rest stay.
    const later = await sweepProvider(PROVIDER, lifecycle, { ...deps, now: () => new Date(Date.now() + 3_600_000) }, signal());
    expect(later.deleted).toEqual([{ name: 'ep-ghost-young', reason: 'no-proxy' }]);
    const left: Instance[] = [];
    for await (const i of lifecycle.listInstances(fleet, signal())) left.push(i);
    expect(left.map((i) => i.name)).toEqual([instanceNameFor(fleet, proxy)]);
    expect(compute.listInstances()).toHaveLength(4);
  });
});
