/**
 * GC sweeps of a leaked fleet on the kubernetes and Compute fakes.
 *
 *   npm run bench -- gc-scale     # BENCH_GC_ORPHANS=1000, BENCH_GC_OWNED=1000, BENCH_GC_RATES=1000,50
 *
 * Each provider gets N orphans (old, no proxy owns them; every tenth a superseded instance of a live
 * proxy) among N owned instances, 100 young ones and 100 of another fleet or unlabelled, listed at
 * our page size (500, GCE's cap). Proxies live in a private redis-server. At each delete rate of
 * BENCH_GC_RATES, a fresh fake is seeded and swept until a sweep deletes nothing; kubernetes needs
 * two sweeps with deletes (the Pods, then their Secrets once the kubelet — the bench — has
 * finished the graceful deletions). Per sweep: wall time, instances deleted, and the API requests
 * the fake received, by kind. The sweep runs in this process (`sweepProvider`, as a worker's gc job
 * does), the fakes too: their time is in the figures.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OAuth2Client } from 'google-auth-library';
import { Redis } from 'ioredis';
import { silentLogger } from '../src/logging.ts';
import type { Proxy } from '../src/model/proxy-resource.ts';
import { createComputeClients } from '../src/providers/gcp/index.ts';
import { createGcpLifecycle } from '../src/providers/gcp/lifecycle.ts';
import { createKubernetesLifecycle } from '../src/providers/kubernetes/lifecycle.ts';
import type { ProxyLifecycle } from '../src/providers/lifecycle.ts';
import { sweepProvider } from '../src/proxies/gc.ts';
import { startRedisChild } from '../src/redis/redis-server.ts';
import { RedisProxyStore } from '../src/store/redis-proxy-store.ts';
import { startFakeCompute } from '../test/fakes/compute/index.ts';
import { startFakeKubeApiserver } from '../test/fakes/kube-apiserver/index.ts';
import { applyOwners, finishTerminatingPods, seedComputeFleet, seedKubeFleet, type FleetMix } from '../test/support/gc-fleet.ts';
import { fmt } from './stats.ts';

const MIX: FleetMix = {
  orphans: Number(process.env.BENCH_GC_ORPHANS ?? 1000),
  owned: Number(process.env.BENCH_GC_OWNED ?? 1000),
  young: 100,
  foreign: 100,
};
const RATES = (process.env.BENCH_GC_RATES ?? '1000,50')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const FLEET = 'bench-gc';
const ZONES = ['europe-west1-b', 'us-central1-a', 'us-central1-b'];

interface SweepFigures {
  provider: string;
  rate: number;
  sweep: number;
  ms: number;
  seen: number;
  deleted: number;
  requests: Record<string, number>;
}

/** Requests by kind: `list` (a page), `delete`, and the rest by method. */
function kinds(requests: { method: string; path: string }[], isList: (path: string) => boolean): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of requests) {
    const kind = r.method === 'GET' && isList(r.path) ? 'list' : r.method.toLowerCase();
    out[kind] = (out[kind] ?? 0) + 1;
  }
  return out;
}

async function sweepUntilClean(
  provider: string,
  rate: number,
  lifecycle: ProxyLifecycle,
  store: RedisProxyStore,
  requests: { method: string; path: string }[],
  isList: (path: string) => boolean,
  between: () => void,
): Promise<SweepFigures[]> {
  const out: SweepFigures[] = [];
  for (let sweep = 1; sweep <= 5; sweep++) {
    const from = requests.length;
    const t0 = performance.now();
    const r = await sweepProvider(
      provider,
      lifecycle,
      { proxies: store, fleet: FLEET, graceMs: 600_000, logger: silentLogger(), deletesPerSecond: rate },
      AbortSignal.timeout(600_000),
    );
    const ms = performance.now() - t0;
    out.push({ provider, rate, sweep, ms, seen: r.seen, deleted: r.deleted.length, requests: kinds(requests.slice(from), isList) });
    if (r.deleted.length === 0) break;
    between();
  }
  return out;
}

async function kubernetes(rate: number, store: RedisProxyStore, owners: Proxy[]): Promise<SweepFigures[]> {
  const kube = await startFakeKubeApiserver();
  try {
    seedKubeFleet(kube, FLEET, owners, MIX);
    const lifecycle = createKubernetesLifecycle({ kubeConfig: kube.kubeConfig(), namespace: 'proxies', logger: silentLogger() });
    const isList = (path: string): boolean => path === '/api/v1/pods' || path === '/api/v1/secrets';
    return await sweepUntilClean('k8s', rate, lifecycle, store, kube.requests, isList, () => finishTerminatingPods(kube));
  } finally {
    await kube.close();
  }
}

async function gcp(rate: number, store: RedisProxyStore, owners: Proxy[]): Promise<SweepFigures[]> {
  const compute = await startFakeCompute({ zones: ZONES, tokens: ['t'] });
  const auth = new OAuth2Client();
  auth.setCredentials({ access_token: 't', expiry_date: Date.now() + 3_600_000 });
  const clients = createComputeClients({ ...compute.clientOptions(), authClient: auth });
  try {
    seedComputeFleet(compute, ZONES, FLEET, owners, MIX);
    const lifecycle = createGcpLifecycle({
      clients,
      project: compute.project,
      zone: ZONES[1] ?? '',
      image: 'projects/egress/global/images/family/forward-proxy',
      logger: silentLogger(),
      operationPollMs: 0,
    });
    const isList = (path: string): boolean => path.endsWith('/aggregated/instances');
    return await sweepUntilClean('gce', rate, lifecycle, store, compute.requests, isList, () => undefined);
  } finally {
    await clients.close();
    await compute.close();
  }
}

export async function runGcScaleBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-gc-'));
  const redis = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  const client = new Redis(redis.url);
  const store = new RedisProxyStore(client, '{bench-gc}');
  const figures: SweepFigures[] = [];
  try {
    const owners = { k8s: await applyOwners(store, 'k8s', MIX.owned), gce: await applyOwners(store, 'gce', MIX.owned) };
    for (const rate of RATES) {
      figures.push(...(await kubernetes(rate, store, owners.k8s)));
      figures.push(...(await gcp(rate, store, owners.gce)));
    }
  } finally {
    await store.close();
    client.disconnect();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
  console.log(`\nGC sweeps: ${MIX.orphans} orphans, ${MIX.owned} owned, ${MIX.young} young, ${MIX.foreign} foreign/unlabelled per provider; page size 500\n`);
  console.log('| provider | deletes/s | sweep | time, s | seen | deleted | list pages | deletes | other requests |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const f of figures) {
    const { list = 0, delete: del = 0, ...rest } = f.requests;
    const other = Object.entries(rest)
      .map(([k, n]) => `${n} ${k}`)
      .join(', ');
    console.log(`| ${f.provider} | ${f.rate} | ${f.sweep} | ${fmt(f.ms / 1000)} | ${f.seen} | ${f.deleted} | ${list} | ${del} | ${other || '—'} |`);
  }
  console.log(JSON.stringify({ bench: 'gc-scale', mix: MIX, figures: figures.map((f) => ({ ...f, ms: Math.round(f.ms) })) }));
}
