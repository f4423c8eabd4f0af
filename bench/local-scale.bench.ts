/**
 * A thousand local proxies: apply → all Ready, and the proxy host's memory per proxy.
 *
 *   npm run bench -- local-scale            (BENCH_LOCAL_SCALE=1000 by default)
 *
 * `egress up`'s roles in this process (its own private redis-server, worker concurrency 50):
 *
 * 1. N proxies applied in one request, timed until discovery lists every one Ready (each Ready proxy
 *    passed a probe through itself), then the resident memory of the host and its relays (VmRSS of /proc/<pid>/status)
 *    with N proxies;
 * 2. everything deleted (the host stops with its last proxy), then 1 proxy applied → host RSS with 1,
 *    then 99 more → RSS with 100.
 *
 * Marginal memory per proxy = (RSS(N) − RSS(1)) / (N − 1), and between 1 and 100 likewise.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runRoles } from '../src/cli/run-roles.ts';
import type { AppConfig } from '../src/config/app.ts';
import { silentLogger } from '../src/logging.ts';
import { asHostRecord, HOST_FILE, hostDir, readJson } from '../src/providers/local/instance-files.ts';
import { findHostProcesses } from '../src/providers/local/process-table.ts';
import { startRedisChild } from '../src/redis/redis-server.ts';
import { fmt } from './stats.ts';
import { childrenOf } from '../test/support/process-children.ts';
import { benchConfig } from './support/app-config.ts';

const N = Number(process.env.BENCH_LOCAL_SCALE ?? '1000');

function config(redisUrl: string, dataDir: string): AppConfig {
  return benchConfig(redisUrl, '{bench-local-scale}', dataDir, {
    recheckMs: 100,
    worker: { queues: ['reconcile'], concurrency: 50, lockDurationMs: 60_000, stalledIntervalMs: 60_000 },
    readiness: { failureThreshold: 1, successThreshold: 2, replaceAfterMs: 300_000, intervalMs: 60_000, timeoutMs: 5000 },
    shutdownGraceMs: 5000,
    backoffMs: 200,
  });
}

async function until(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Resident memory in MB and open file descriptors of the host `pid` and its relay processes together. */
async function usage(pid: number): Promise<{ rssMb: number; fds: number }> {
  let kb = 0;
  let fds = 0;
  for (const p of [pid, ...(await childrenOf(pid))]) {
    const status = await readFile(`/proc/${p}/status`, 'utf8');
    kb += Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
    fds += (await readdir(`/proc/${p}/fd`)).length;
  }
  return { rssMb: kb / 1024, fds };
}

export async function runLocalScaleBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-scale-'));
  const redis = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  const roles = await runRoles(config(redis.url, dir), ['worker', 'api'], silentLogger());
  const api = roles.api?.url ?? '';
  const localDir = join(dir, 'local', 'local');
  const count = async (q: string): Promise<number> => {
    const body = (await (await fetch(`${api}/v1/proxies${q}`)).json()) as { items?: unknown[] };
    if (!body.items) throw new Error(`listing proxies${q} answered ${JSON.stringify(body)}`);
    return body.items.length;
  };
  const hostPid = async (): Promise<number> => {
    const record = asHostRecord(await readJson(join(hostDir(localDir), HOST_FILE)));
    if (!record) throw new Error('no proxy host record');
    return record.pid;
  };
  const apply = async (names: string[]): Promise<void> => {
    const yaml = names.map((name) => `metadata: { name: ${name} }\nspec: { provider: local }\n`).join('---\n');
    const res = await fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: yaml });
    if (!res.ok) throw new Error(`apply failed: ${res.status} ${await res.text()}`);
  };
  const deleteAll = async (names: string[]): Promise<void> => {
    for (let i = 0; i < names.length; i += 100) {
      await Promise.all(names.slice(i, i + 100).map((name) => fetch(`${api}/v1/proxies/${name}`, { method: 'DELETE' })));
    }
    await until('every proxy gone', async () => (await count('')) === 0, 900_000);
    await until('the proxy host stopped', async () => (await findHostProcesses(localDir)).length === 0, 60_000);
  };
  const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 2000));
  let readyMs = NaN;
  let deleteMs = NaN;
  let atN = { rssMb: NaN, fds: NaN };
  let at1 = { rssMb: NaN, fds: NaN };
  let at100 = { rssMb: NaN, fds: NaN };
  try {
    const names = Array.from({ length: N }, (_, i) => `s${i}`);
    const t0 = performance.now();
    await apply(names);
    await until(`${N} proxies Ready`, async () => (await count('?ready=true')) === N, 900_000);
    readyMs = performance.now() - t0;
    await settle();
    atN = await usage(await hostPid());
    const t1 = performance.now();
    await deleteAll(names);
    deleteMs = performance.now() - t1;

    await apply(['m0']);
    await until('1 proxy Ready', async () => (await count('?ready=true')) === 1, 60_000);
    await settle();
    at1 = await usage(await hostPid());
    const more = Array.from({ length: 99 }, (_, i) => `m${i + 1}`);
    await apply(more);
    await until('100 proxies Ready', async () => (await count('?ready=true')) === 100, 300_000);
    await settle();
    at100 = await usage(await hostPid());
    await deleteAll(['m0', ...more]);
  } finally {
    await roles.close();
    await redis.stop();
    // A run that failed half-way leaves its proxies served: the host (and with it its relays) would outlive the bench.
    for (const pid of await findHostProcesses(localDir)) process.kill(pid, 'SIGTERM');
    await until('the proxy host stopped', async () => (await findHostProcesses(localDir)).length === 0, 30_000);
    await rm(dir, { recursive: true, force: true });
  }
  const perProxyN = (atN.rssMb - at1.rssMb) / (N - 1);
  const perProxy100 = (at100.rssMb - at1.rssMb) / 99;
  console.log(`${N} local proxies on one proxy host: apply → all Ready (each passed a probe through itself); worker concurrency 50`);
  console.log('| measure | value |');
  console.log('|---|---|');
  console.log(`| apply ${N} → all Ready | ${fmt(readyMs / 1000, 1)} s |`);
  console.log(`| delete ${N} → all gone, host stopped | ${fmt(deleteMs / 1000, 1)} s |`);
  console.log(`| host + relays RSS with 1 proxy | ${fmt(at1.rssMb, 1)} MB (${at1.fds} fds) |`);
  console.log(`| host + relays RSS with 100 proxies | ${fmt(at100.rssMb, 1)} MB (${at100.fds} fds) |`);
  console.log(`| host + relays RSS with ${N} proxies | ${fmt(atN.rssMb, 1)} MB (${atN.fds} fds) |`);
  console.log(`| marginal memory per proxy, 1 → 100 | ${fmt(perProxy100 * 1024, 0)} kB |`);
  console.log(`| marginal memory per proxy, 1 → ${N} | ${fmt(perProxyN * 1024, 0)} kB (target ≤ 2 MB) |`);
  console.log(
    JSON.stringify({
      bench: 'local-scale',
      proxies: N,
      readyMs: Math.round(readyMs),
      deleteMs: Math.round(deleteMs),
      rssMb: { 1: at1.rssMb, 100: at100.rssMb, [N]: atN.rssMb },
      fds: { 1: at1.fds, 100: at100.fds, [N]: atN.fds },
      marginalKbPerProxy: { to100: Math.round(perProxy100 * 1024), [`to${N}`]: Math.round(perProxyN * 1024) },
    }),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await runLocalScaleBench();
