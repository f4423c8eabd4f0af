import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { Job } from 'bullmq';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { HostConnection } from '../../src/kvm/host-connection.ts';
import { DomainState, type LibvirtConnection } from '../../src/kvm/libvirt/index.ts';
import { createKvmHostPool, createKvmPoolMetrics, type KvmHostPool } from '../../src/kvm/pool/index.ts';
import { silentLogger } from '../../src/logging.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { fleetOf } from '../../src/proxies/instance-name.ts';
import type { KvmHostConfig } from '../../src/providers/kvm/config.ts';
import { createKvmLifecycle } from '../../src/providers/kvm/lifecycle.ts';
import type { Instance, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { createLocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { isProxyHostProgram, isProxyProgram } from '../../src/providers/local/process-table.ts';
import { podEnv, startFakeKubeApiserver, type FakeKubeApiserver, type KubeRequest } from '../fakes/kube-apiserver/index.ts';
import { ROOT, type EgressProcess } from '../support/cli.ts';
import { kvmHostConfigOf, kvmTestHost } from '../support/kvm-host.ts';
import { activeJobOf, startProcessCluster, withLogs, type ProcessCluster } from '../support/process-cluster.ts';
import { startContainerProxy, type ContainerProxy } from '../support/container-proxy.ts';
import { waitFor } from '../support/wait.ts';
import { orUndefined } from '../../src/providers/kvm/lifecycle-ops.ts';

// "A worker killed with SIGKILL in the middle of a create, the job taken over by another worker:
// then exactly one instance per proxy." Every role is its own process (`egress api`, `egress
// worker`, or the crashing-worker harness) sharing the run's Redis under a fresh prefix. BullMQ
// runs the stalled-job check once per interval across all workers of a queue, so every worker
// gets the same short lock and stalled interval.
const LOCKS = ['--lock-duration', '1s', '--stalled-interval', '500ms'];
const CRASHING_WORKER = resolve(ROOT, 'test/support/crashing-worker.ts');

type Cluster = ProcessCluster;
const startCluster = startProcessCluster;

/**
 * Deletes every proxy through the API and waits until they are gone (`tick` runs between looks),
 * then stops the test's workers: each must exit cleanly (the SIGKILLed one excepted).
 */
async function deleteAllProxies(c: Cluster, tick: () => void = () => undefined): Promise<void> {
  const { items } = (await (await fetch(`${c.api}/v1/proxies`)).json()) as { items: ProxyView[] };
  for (const p of items) await fetch(`${c.api}/v1/proxies/${p.name}`, { method: 'DELETE' });
  await waitFor(
    'every proxy gone',
    async () => {
      tick();
      return ((await (await fetch(`${c.api}/v1/proxies`)).json()) as { items: unknown[] }).items.length === 0;
    },
    30_000,
  );
  const workers = c.workers.splice(0);
  const codes = await Promise.all(workers.map((w) => w.stop()));
  expect(codes.filter((code) => code !== 0 && code !== null)).toEqual([]);
}

/** Pids of live local proxy hosts (and forward-proxy processes of the earlier model) whose data or instance directory lies under `dataDir`. */
async function proxyProcessesUnder(dataDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    let args: string[];
    try {
      args = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    } catch {
      continue;
    }
    const script = args.findIndex((arg) => isProxyProgram(arg) || isProxyHostProgram(arg));
    if (script >= 0 && args[script + 1]?.startsWith(`${dataDir}/`)) pids.push(pid);
  }
  return pids;
}

describe('crash safety on the local provider', () => {
  let c: Cluster;

  beforeAll(async () => {
    c = await startCluster('providers:\n  - { name: local, type: local }\n');
  });
  afterEach(async () => {
    await deleteAllProxies(c);
    // A host exits on its own once it has answered the delete of its last proxy: waited out, not raced.
    await waitFor('the proxy hosts of this run to exit', async () => ((await proxyProcessesUnder(c.dataDir)).length === 0 ? true : undefined), 15_000);
  });
  afterAll(async () => {
    await c?.close();
  });

  async function expectOneInstance(name: string): Promise<ProxyView> {
    const ready = await waitFor(
      `${name} to be Ready`,
      async () => {
        const p = await c.proxy(name);
        return p?.status.phase === 'Ready' ? p : undefined;
      },
      30_000,
    );
    // Exactly one proxy host for this run's data directory, and it serves the proxy (the id is `<host pid>:<port>`).
    const pids = await proxyProcessesUnder(c.dataDir);
    expect(pids).toHaveLength(1);
    expect(ready.status.instanceId).toBe(`${pids[0]}:${new URL(ready.status.url ?? '').port}`);
    const lifecycle = createLocalLifecycle({ dataDir: join(c.dataDir, 'local', 'local'), logger: silentLogger() });
    const listed = [];
    for await (const i of lifecycle.listInstances(fleetOf(c.prefix), AbortSignal.timeout(10_000))) listed.push(i);
    expect(listed.map((i) => ({ name: i.name, proxy: i.owner.proxy, state: i.state }))).toEqual([
      { name: ready.status.instanceName, proxy: name, state: 'running' },
    ]);
    return ready;
  }

  test('killed after the proxy host was spawned, before it served the proxy: the next worker adopts the host', async () => {
    const doomed = c.start(['worker', ...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo]);
    await doomed.waitForLog('worker started');
    await c.apply('metadata: { name: spawned-1 }\nspec: { provider: local }\n');
    const job = await activeJobOf(c.reconcile, 'spawned-1');
    await doomed.waitForLog('local proxy host spawned');
    doomed.child.kill('SIGKILL');
    expect(await doomed.exited).toBe(null);
    // It died inside the create: it never concluded anything about the proxy.
    expect(doomed.logs()).not.toContain('reconciled proxy');

    const rescuer = c.start(['worker', ...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo]);
    await withLogs(c.workers, () => expectOneInstance('spawned-1'));
    expect(rescuer.logs()).toContain(`"jobId":"${job.id}"`);
    expect((await c.reconcile.getJob(job.id ?? ''))?.stalledCounter).toBe(1);
  });

  test('killed after the create returned, before the status was written: the next worker finds the running instance', async () => {
    const doomed = c.start([...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo], CRASHING_WORKER, { PAUSE_AFTER_ENSURE: 'local' });
    await doomed.waitForLog('worker started');
    await c.apply('metadata: { name: created-1 }\nspec: { provider: local }\n');
    const job = await activeJobOf(c.reconcile, 'created-1');
    await doomed.waitForLog('ENSURE_RETURNED local');
    const before = await proxyProcessesUnder(c.dataDir);
    expect(before).toHaveLength(1);
    doomed.child.kill('SIGKILL');
    expect(await doomed.exited).toBe(null);
    expect((await c.proxy('created-1'))?.status.phase).toBe('Provisioning');

    const rescuer = c.start([...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo], CRASHING_WORKER);
    const ready = await withLogs(c.workers, () => expectOneInstance('created-1'));
    // The very host and listener the dead worker started, not a new one.
    expect(ready.status.instanceId?.split(':')[0]).toBe(String(before[0]));
    expect(rescuer.logs()).toContain(`"jobId":"${job.id}"`);
    expect((await c.reconcile.getJob(job.id ?? ''))?.stalledCounter).toBe(1);
  });
});

describe('crash safety on the kubernetes provider (fake apiserver; the test plays the kubelet)', () => {
  let c: Cluster;
  let kube: FakeKubeApiserver;
  let kubelet: ContainerProxy;
  let tokenDir: string | undefined;
  const PODS = '/api/v1/namespaces/proxies/pods';

  beforeAll(async () => {
    kubelet = await startContainerProxy();
    kube = await startFakeKubeApiserver({ tokens: { 'kube-token': 'system:serviceaccount:egress:operator' } });
    kube.store.namespaces.add('proxies');
    const dir = await mkdtemp(join(tmpdir(), 'egress-crash-kube-'));
    tokenDir = dir;
    await writeFile(join(dir, 'kube-token'), 'kube-token\n');
    c = await startCluster(
      `providers:\n  - { name: k8s, type: kubernetes, server: "${kube.url}", tokenFile: "${join(dir, 'kube-token')}", skipTLSVerify: true, namespace: proxies, proxies: { port: ${kubelet.port} } }\n`,
    );
  });
  afterEach(async () => {
    // Deleting: a Pod bound to a node terminates gracefully; the test's kubelet finishes it.
    await deleteAllProxies(c, () => {
      for (const p of kube.listPods('proxies')) if (p.metadata.deletionTimestamp) kube.finishPodDeletion('proxies', p.metadata.name);
    });
    expect(kube.listPods('proxies')).toEqual([]);
    expect(kube.listSecrets('proxies')).toEqual([]);
  });
  afterAll(async () => {
    await c?.close();
    await kubelet?.close();
    await kube?.close();
    if (tokenDir) await rm(tokenDir, { recursive: true, force: true });
  });

  /** Resolves with the next POST that creates a Pod. */
  function nextPodCreate(): Promise<KubeRequest> {
    return new Promise((resolvePost) => {
      const onRequest = (r: KubeRequest): void => {
        if (r.method === 'POST' && r.path === PODS) {
          kube.off('request', onRequest);
          resolvePost(r);
        }
      };
      kube.on('request', onRequest);
    });
  }

  /** Plays the kubelet for the proxy's one Pod and waits for the proxy to be Ready. */
  async function runPodAndExpectReady(name: string): Promise<void> {
    const pods = await waitFor(`the Pod of ${name}`, () => {
      const found = kube.listPods('proxies').filter((p) => p.metadata.labels?.['egress-proxies/proxy'] === name);
      return found.length > 0 ? found : undefined;
    });
    const pod = pods[0];
    if (!pod) throw new Error('unreachable');
    // The credentials come from the Pod's Secret (secretKeyRef), as the kubelet resolves them.
    const env = podEnv(kube, pod);
    kubelet.credentials.user = env.PROXY_USER ?? '';
    kubelet.credentials.password = env.PROXY_PASSWORD ?? '';
    kube.setPodStatus('proxies', pod.metadata.name, { phase: 'Running', podIP: '127.0.0.1', ready: true });
    const ready = await waitFor(
      `${name} to be Ready`,
      async () => {
        const p = await c.proxy(name);
        return p?.status.phase === 'Ready' ? p : undefined;
      },
      30_000,
    );
    expect(ready.status).toMatchObject({ instanceName: pod.metadata.name, url: `http://127.0.0.1:${kubelet.port}` });
    // Exactly one Pod (and one Secret) for the proxy, never two.
    expect(kube.listPods('proxies').map((p) => p.metadata.labels?.['egress-proxies/proxy'])).toEqual([name]);
    expect(kube.listSecrets('proxies').map((s) => [s.metadata.name, s.metadata.labels?.['egress-proxies/proxy']])).toEqual([[pod.metadata.name, name]]);
  }

  async function crashDuringCreate(name: string, commit: boolean): Promise<{ job: Job; rescuer: EgressProcess; post: KubeRequest }> {
    // The apiserver holds the create; the worker is killed while it waits for the answer.
    kube.injectFault({ latencyMs: 120_000, match: { method: 'POST', path: PODS } });
    const posted = nextPodCreate();
    const doomed = c.start(['worker', ...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo]);
    await doomed.waitForLog('worker started');
    await c.apply(`metadata: { name: ${name} }\nspec: { provider: k8s }\n`);
    const job = await activeJobOf(c.reconcile, name);
    const post = await posted;
    // When `commit`, the apiserver stored the Pod but its answer never reached the worker.
    if (commit) kube.store.create('proxies', JSON.parse(post.body));
    const aborted = kube.nextClientAbort();
    doomed.child.kill('SIGKILL');
    expect(await doomed.exited).toBe(null);
    expect((await aborted).path).toBe(PODS);
    expect(doomed.logs()).not.toContain('reconciled proxy');
    expect(kube.listPods('proxies')).toHaveLength(commit ? 1 : 0);
    // The Secret comes before the Pod: it was made before the worker died.
    expect(kube.listSecrets('proxies')).toHaveLength(1);
    const rescuer = c.start(['worker', ...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo]);
    return { job, rescuer, post };
  }

  test('killed while the Pod create is held and the apiserver had stored it: the next worker adopts that Pod', async () => {
    const { job, rescuer } = await crashDuringCreate('stored-1', true);
    await withLogs(c.workers, () => runPodAndExpectReady('stored-1'));
    expect(rescuer.logs()).toContain(`"jobId":"${job.id}"`);
    expect((await c.reconcile.getJob(job.id ?? ''))?.stalledCounter).toBe(1);
  });

  test('killed while the Pod create is held and never stored: the next worker creates the one Pod', async () => {
    const { job, rescuer, post } = await crashDuringCreate('lost-1', false);
    await withLogs(c.workers, () => runPodAndExpectReady('lost-1'));
    // The same deterministic name both times.
    const nameOf = (r: KubeRequest): string => (JSON.parse(r.body) as { metadata: { name: string } }).metadata.name;
    const created = kube.requests.filter((r) => r.method === 'POST' && r.path === PODS && r.status === 201 && nameOf(r) === nameOf(post));
    expect(created).toHaveLength(1);
    expect(rescuer.logs()).toContain(`"jobId":"${job.id}"`);
    expect((await c.reconcile.getJob(job.id ?? ''))?.stalledCounter).toBe(1);
  });
});

describe('crash safety on the kvm provider (the real test host)', () => {
  let c: Cluster;
  let host: KvmHostConfig;
  let pool: KvmHostPool;
  let lifecycle: ProxyLifecycle;
  let baseVolume: string;
  const sig = (): AbortSignal => AbortSignal.timeout(30_000);
  const lib = <T>(fn: (conn: LibvirtConnection, s: AbortSignal) => Promise<T>): Promise<T> =>
    pool.call(host, (conn: HostConnection, s) => fn(conn.libvirt, s), sig());

  beforeAll(async () => {
    const testHost = await kvmTestHost();
    host = kvmHostConfigOf(testHost, 'kvm-test');
    pool = createKvmHostPool({ logger: silentLogger(), metrics: createKvmPoolMetrics(new Registry()), idleTimeoutMs: 0 });
    // A tiny qcow2 base image of this run, made in the pool's directory and picked up by a refresh.
    baseVolume = `egt-crash-${randomUUID().slice(0, 8)}-base.qcow2`;
    await promisify(execFile)('qemu-img', ['create', '-q', '-f', 'qcow2', join(testHost.poolDir, baseVolume), '16M']);
    await lib(async (conn, s) => conn.storagePoolRefresh(await conn.storagePoolLookupByName(host.pool, s), s));
    lifecycle = createKvmLifecycle({
      pool,
      hosts: [host],
      logger: silentLogger(),
      options: { baseImageVolume: baseVolume, memoryMiB: 64, domainType: 'qemu' },
    });
    const h = JSON.stringify(host);
    c = await startCluster(
      `providers:\n  - { name: kvm, type: kvm, hosts: [ ${h} ], proxies: { baseImageVolume: "${baseVolume}", memoryMiB: 64, domainType: qemu } }\n`,
    );
  }, 360_000);
  afterEach(async () => {
    await deleteAllProxies(c);
    expect(await mine()).toEqual([]);
  });
  afterAll(async () => {
    await c?.close();
    if (pool) {
      // Whatever a failed test left behind: this run's domains (by our fleet tag) and volumes.
      for (const i of await mine()) await lifecycle.deleteInstance(i.name, i.placement, { owner: i.owner, nameIsOurs: true }, sig()).catch(() => undefined);
      if (baseVolume) {
        await lib(async (conn, s) => {
          const p = await conn.storagePoolLookupByName(host.pool, s);
          const v = await orUndefined(conn.storageVolLookupByName(p, baseVolume, s));
          if (v) await conn.storageVolDelete(v, 0, s);
        });
      }
      await pool.close();
    }
  });

  /** This run's domains on the host, as the lifecycle lists them by our fleet's tag. */
  async function mine(): Promise<Instance[]> {
    const out: Instance[] = [];
    for await (const i of lifecycle.listInstances(fleetOf(c.prefix), sig())) out.push(i);
    return out;
  }

  async function expectOneDomain(name: string): Promise<void> {
    const view = await waitFor(
      `${name} to record its instance`,
      async () => {
        const p = await c.proxy(name);
        return p?.status.instanceId ? p : undefined;
      },
      60_000,
    );
    const domains = await mine();
    expect(domains.map((d) => ({ name: d.name, proxy: d.owner.proxy, id: d.id }))).toEqual([
      { name: view.status.instanceName, proxy: name, id: view.status.instanceId },
    ]);
    expect(['Provisioning', 'Ready']).toContain(view.status.phase);
    // And by name on the host: one domain, running.
    expect(await lib(async (conn, s) => (await conn.domainGetState(await conn.domainLookupByName(view.status.instanceName ?? '', s), s)).state)).toBe(
      DomainState.RUNNING,
    );
  }

  test('killed right after the domain was defined (its start in flight): the next worker finishes the one domain', async () => {
    const doomed = c.start(['worker', ...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo]);
    await doomed.waitForLog('worker started');
    await c.apply('metadata: { name: defined-1 }\nspec: { provider: kvm }\n');
    const job = await activeJobOf(c.reconcile, 'defined-1');
    await doomed.waitForLog('proxy domain defined', 60_000);
    doomed.child.kill('SIGKILL');
    expect(await doomed.exited).toBe(null);
    expect(doomed.logs()).not.toContain('reconciled proxy');
    expect(await mine()).toHaveLength(1);

    const rescuer = c.start(['worker', ...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo]);
    await withLogs(c.workers, () => expectOneDomain('defined-1'));
    expect(rescuer.logs()).toContain(`"jobId":"${job.id}"`);
    expect((await c.reconcile.getJob(job.id ?? ''))?.stalledCounter).toBe(1);
  });

  test('killed after the create returned, before the status was written: the next worker finds the running domain', async () => {
    const doomed = c.start([...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo], CRASHING_WORKER, { PAUSE_AFTER_ENSURE: 'kvm' });
    await doomed.waitForLog('worker started');
    await c.apply('metadata: { name: started-1 }\nspec: { provider: kvm }\n');
    const job = await activeJobOf(c.reconcile, 'started-1');
    await doomed.waitForLog('ENSURE_RETURNED kvm', 60_000);
    const [made] = await mine();
    doomed.child.kill('SIGKILL');
    expect(await doomed.exited).toBe(null);

    const rescuer = c.start([...c.common, '--queues', 'reconcile', ...LOCKS, '--echo-url', c.echo], CRASHING_WORKER);
    await withLogs(c.workers, () => expectOneDomain('started-1'));
    // The very domain the dead worker made.
    expect((await mine())[0]?.id).toBe(made?.id);
    expect(rescuer.logs()).toContain(`"jobId":"${job.id}"`);
    expect((await c.reconcile.getJob(job.id ?? ''))?.stalledCounter).toBe(1);
  });
});
