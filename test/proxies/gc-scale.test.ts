import { Redis } from 'ioredis';
import { OAuth2Client } from 'google-auth-library';
import { afterAll, afterEach, beforeAll, describe, expect, inject, test } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { createComputeClients, type ComputeClients } from '../../src/providers/gcp/index.ts';
import { createGcpLifecycle } from '../../src/providers/gcp/lifecycle.ts';
import { createKubernetesLifecycle } from '../../src/providers/kubernetes/lifecycle.ts';
import type { ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { sweepProvider, type GcDeps } from '../../src/proxies/gc.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { startFakeCompute, type ComputeRequest, type FakeCompute } from '../fakes/compute/index.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver, type KubeRequest } from '../fakes/kube-apiserver/index.ts';
import { uniquePrefix } from '../support/config.ts';
import {
  applyOwners,
  arrivals,
  failNth,
  finishTerminatingPods,
  seedComputeFleet,
  seedKubeFleet,
  type FleetMix,
  type SeededFleet,
} from '../support/gc-fleet.ts';

// GC at fleet scale on the kubernetes and Compute fakes: 1,000 orphans among 1,000 owned
// instances, young ones and other fleets' and unlabelled ones, listed at the page size our list
// calls ask for (500, GCE's cap). Assertions are on the fakes' own inventories and request logs.
const FLEET = 'gc-scale';
const PROJECT = 'egress-test';
const ZONES = ['europe-west1-b', 'us-central1-a', 'us-central1-b'];
const MIX: FleetMix = { orphans: 1000, owned: 1000, young: 100, foreign: 100 };
const signal = (): AbortSignal => AbortSignal.timeout(120_000);
const sorted = (names: Iterable<string>): string[] => [...names].sort();

let redis: Redis;
let store: RedisProxyStore;
const owners: Record<'k8s' | 'gce', Proxy[]> = { k8s: [], gce: [] };

beforeAll(async () => {
  redis = new Redis(inject('redisUrl'));
  store = new RedisProxyStore(redis, uniquePrefix());
  owners.k8s = await applyOwners(store, 'k8s', MIX.owned);
  owners.gce = await applyOwners(store, 'gce', MIX.owned);
}, 120_000);
afterAll(async () => {
  await store?.close();
  redis?.disconnect();
});

const deps = (deletesPerSecond: number): GcDeps => ({ proxies: store, fleet: FLEET, graceMs: 10 * 60_000, logger: silentLogger(), deletesPerSecond });

/** Names of Pods and Secrets the fake holds in namespace `proxies`. */
const kubeInventory = (kube: FakeKubeApiserver) => ({
  pods: sorted(kube.listPods('proxies').map((p) => p.metadata.name)),
  secrets: sorted(kube.listSecrets('proxies').map((s) => s.metadata.name)),
});
const deletedNames = (requests: { method: string; path: string }[], segment: string): string[] =>
  requests.filter((r) => r.method === 'DELETE' && r.path.includes(`/${segment}/`)).map((r) => r.path.split('/').pop() ?? '');

/** `lifecycle`, with the moment the sweep calls each deleteInstance recorded in `times`. */
function timedDeletes(lifecycle: ProxyLifecycle): { lifecycle: ProxyLifecycle; times: number[] } {
  const times: number[] = [];
  const timed: ProxyLifecycle = {
    ...lifecycle,
    deleteInstance: (...args) => {
      times.push(performance.now());
      return lifecycle.deleteInstance(...args);
    },
  };
  return { lifecycle: timed, times };
}

/**
 * The sweep starts deletes at least 1000 / perSecond ms apart, so no second of its calls holds more
 * than `perSecond`, however loaded the machine (a stall only widens a gap), give or take one: the
 * call comes after the read of the proxy that precedes each delete, and timers round by a
 * millisecond. At the fake, arrivals
 * jitter by each request's own latency (a loaded machine can hold several back and let them arrive
 * together), so there the pace shows as the whole run's length: n paced deletes span at least
 * (n - 1) / perSecond seconds, less a second for the first call's extra latency. Unpaced, all of
 * them arrive within a few milliseconds.
 */
function expectPaced(starts: number[], arrivals: number[], perSecond: number): void {
  const busiest = Math.max(...starts.map((t) => starts.filter((u) => u >= t && u < t + 1000).length));
  expect(busiest).toBeLessThanOrEqual(perSecond + 1);
  const span = Math.max(...arrivals) - Math.min(...arrivals);
  expect(span).toBeGreaterThanOrEqual(((arrivals.length - 1) * 1000) / perSecond - 1000);
}

describe('fleet-scale GC on the kubernetes fake', () => {
  let kube: FakeKubeApiserver;
  let lifecycle: ProxyLifecycle;
  let fleet: SeededFleet;

  const start = async (mix: FleetMix): Promise<void> => {
    kube = await startFakeKubeApiserver();
    lifecycle = createKubernetesLifecycle({ kubeConfig: kube.kubeConfig(), namespace: 'proxies', logger: silentLogger() });
    fleet = seedKubeFleet(kube, FLEET, owners.k8s.slice(0, mix.owned), mix);
  };
  afterEach(async () => {
    await kube?.close();
  });

  test('converges in two sweeps: every old orphan gone (Pods, then their Secrets), nothing else touched', async () => {
    await start(MIX);
    const first = await sweepProvider('k8s', lifecycle, deps(1000), signal());
    expect(first).toMatchObject({ seen: MIX.orphans + MIX.owned + MIX.young, kept: MIX.owned, young: MIX.young });
    expect(first.deleted).toHaveLength(MIX.orphans);
    expect(first.deleted.filter((d) => d.reason === 'superseded')).toHaveLength(MIX.orphans / 10);
    const podLists = kube.requests.filter((r) => r.path === '/api/v1/pods');
    expect(podLists.map((r) => r.query.limit)).toEqual(['500', '500', '500', '500', '500']);
    expect(podLists.slice(1).every((r) => Boolean(r.query.continue))).toBe(true);

    // The kubelet finishes the graceful deletions; the orphans' Secrets are then leftovers of their own.
    expect(finishTerminatingPods(kube)).toBe(MIX.orphans);
    const second = await sweepProvider('k8s', lifecycle, deps(1000), signal());
    expect(second.deleted).toHaveLength(MIX.orphans);

    const expected = sorted(fleet.untouchable);
    expect(kubeInventory(kube)).toEqual({ pods: expected, secrets: expected });
    const orphans = new Set(fleet.orphans);
    expect(sorted(deletedNames(kube.requests, 'pods'))).toEqual(sorted(orphans));
    expect(sorted(deletedNames(kube.requests, 'secrets'))).toEqual(sorted(orphans));
    expect(kube.requests.filter((r) => !['GET', 'DELETE'].includes(r.method))).toEqual([]);

    const third = await sweepProvider('k8s', lifecycle, deps(1000), signal());
    expect(third).toMatchObject({ seen: MIX.owned + MIX.young, deleted: [] });
  }, 180_000);

  test('a 500 on the third page of Pods, or on the Secrets after them, fails the sweep with nothing deleted; the next sweep does it all', async () => {
    await start(MIX);
    const before = kubeInventory(kube);
    failNth<KubeRequest>(kube, (r) => r.path === '/api/v1/pods', 3, 500);
    await expect(sweepProvider('k8s', lifecycle, deps(1000), signal())).rejects.toMatchObject({ retryable: true });
    failNth<KubeRequest>(kube, (r) => r.path === '/api/v1/secrets', 1, 500);
    await expect(sweepProvider('k8s', lifecycle, deps(1000), signal())).rejects.toMatchObject({ retryable: true });
    expect(kube.requests.filter((r) => r.method !== 'GET')).toEqual([]);
    expect(kubeInventory(kube)).toEqual(before);

    const next = await sweepProvider('k8s', lifecycle, deps(1000), signal());
    expect(next.deleted).toHaveLength(MIX.orphans);
  }, 180_000);

  test('deletions are paced at deletesPerSecond (the fake sees the Pod DELETEs spaced)', async () => {
    await start({ orphans: 25, owned: 5, young: 2, foreign: 2 });
    const pods = arrivals<KubeRequest>(kube, (r) => r.method === 'DELETE' && r.path.includes('/pods/'));
    const timed = timedDeletes(lifecycle);
    const result = await sweepProvider('k8s', timed.lifecycle, deps(10), signal());
    pods.stop();
    expect(result.deleted).toHaveLength(25);
    expect(pods.times).toHaveLength(25);
    expectPaced(timed.times, pods.times, 10);
  }, 60_000);
});

describe('fleet-scale GC on the Compute fake', () => {
  let compute: FakeCompute;
  let clients: ComputeClients;
  let lifecycle: ProxyLifecycle;
  let fleet: SeededFleet;
  const lists = (): ComputeRequest[] => compute.requests.filter((r) => r.path.endsWith('/aggregated/instances'));
  const names = (): string[] => sorted(compute.listInstances().map((i) => i.name));

  const start = async (mix: FleetMix): Promise<void> => {
    compute = await startFakeCompute({ project: PROJECT, zones: ZONES, tokens: ['gcp-token'] });
    const auth = new OAuth2Client();
    auth.setCredentials({ access_token: 'gcp-token', expiry_date: Date.now() + 3_600_000 });
    clients = createComputeClients({ ...compute.clientOptions(), authClient: auth });
    lifecycle = createGcpLifecycle({
      clients,
      project: PROJECT,
      zone: ZONES[1] ?? '',
      image: 'projects/egress/global/images/family/forward-proxy',
      logger: silentLogger(),
      operationPollMs: 0,
    });
    fleet = seedComputeFleet(compute, ZONES, FLEET, owners.gce.slice(0, mix.owned), mix);
  };
  afterEach(async () => {
    await clients?.close();
    await compute?.close();
  });

  test('converges in one sweep: every old orphan deleted in its zone, nothing else touched', async () => {
    await start(MIX);
    const first = await sweepProvider('gce', lifecycle, deps(1000), signal());
    expect(first).toMatchObject({ seen: MIX.orphans + MIX.owned + MIX.young, kept: MIX.owned, young: MIX.young });
    expect(first.deleted).toHaveLength(MIX.orphans);
    expect(lists().map((r) => r.query.maxResults)).toEqual(['500', '500', '500', '500', '500']);
    expect(names()).toEqual(sorted(fleet.untouchable));
    expect(sorted(deletedNames(compute.requests, 'instances'))).toEqual(sorted(fleet.orphans));

    const second = await sweepProvider('gce', lifecycle, deps(1000), signal());
    expect(second).toMatchObject({ seen: MIX.owned + MIX.young, deleted: [] });
  }, 180_000);

  test('a 500 on the third page, or an unreachable zone, fails the sweep with nothing deleted; the next sweep does it all', async () => {
    await start(MIX);
    const before = names();
    failNth<ComputeRequest>(compute, (r) => r.path.endsWith('/aggregated/instances'), 3, 500);
    await expect(sweepProvider('gce', lifecycle, deps(1000), signal())).rejects.toMatchObject({ retryable: true });
    compute.state.unreachableZones.add(ZONES[2] ?? '');
    await expect(sweepProvider('gce', lifecycle, deps(1000), signal())).rejects.toThrow(/zones\/us-central1-b could not be listed/);
    expect(compute.requests.filter((r) => r.method === 'DELETE')).toEqual([]);
    expect(names()).toEqual(before);

    compute.state.unreachableZones.clear();
    const next = await sweepProvider('gce', lifecycle, deps(1000), signal());
    expect(next.deleted).toHaveLength(MIX.orphans);
    expect(names()).toEqual(sorted(fleet.untouchable));
  }, 180_000);

  test('a delete that fails stops the sweep: no further delete starts, the rest is left for the next sweep', async () => {
    await start({ orphans: 10, owned: 2, young: 0, foreign: 0 });
    failNth<ComputeRequest>(compute, (r) => r.method === 'DELETE', 3, 500);
    await expect(sweepProvider('gce', lifecycle, deps(5), signal())).rejects.toMatchObject({ retryable: true });
    const tried = compute.requests.filter((r) => r.method === 'DELETE');
    // Deletes start 200 ms apart; the failed one answers long before the next would start.
    expect(tried.length).toBeLessThan(5);
    const done = tried.filter((r) => r.status === 200).length;
    expect(compute.listInstances()).toHaveLength(12 - done);
    const next = await sweepProvider('gce', lifecycle, deps(1000), signal());
    expect(next.deleted).toHaveLength(10 - done);
    expect(names()).toEqual(sorted(fleet.untouchable));
  }, 60_000);

  test('a sweep starts no more deletes than its pace allows within deleteBudgetMs; the rest are left for the next', async () => {
    await start({ orphans: 30, owned: 2, young: 0, foreign: 0 });
    const first = await sweepProvider('gce', lifecycle, { ...deps(10), deleteBudgetMs: 1000 }, signal());
    // 10 a second for what is left of one second after the listing, the first at once: at most 11.
    expect(first.deleted.length).toBeGreaterThan(0);
    expect(first.deleted.length).toBeLessThanOrEqual(11);
    expect(first.left).toBe(30 - first.deleted.length);
    expect(compute.requests.filter((r) => r.method === 'DELETE')).toHaveLength(first.deleted.length);
    const second = await sweepProvider('gce', lifecycle, deps(1000), signal());
    expect(second).toMatchObject({ left: 0 });
    expect(second.deleted).toHaveLength(first.left);
    expect(names()).toEqual(sorted(fleet.untouchable));
  }, 60_000);

  test('deletions are paced at deletesPerSecond (the fake sees the DELETEs spaced)', async () => {
    await start({ orphans: 25, owned: 5, young: 2, foreign: 2 });
    const deletes = arrivals<ComputeRequest>(compute, (r) => r.method === 'DELETE');
    const timed = timedDeletes(lifecycle);
    const result = await sweepProvider('gce', timed.lifecycle, deps(10), signal());
    deletes.stop();
    expect(result.deleted).toHaveLength(25);
    expect(deletes.times).toHaveLength(25);
    expectPaced(timed.times, deletes.times, 10);
  }, 60_000);
});
