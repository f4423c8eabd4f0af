/**
 * Apply → Ready on the local provider, for 1, 10 and 100 proxies (`BENCH_PROXIES`).
 *
 *   npm run bench -- proxy-lifecycle
 *
 * `egress up`'s roles in this process (its own private redis-server), worker concurrency 10;
 * proxies applied in one request, timed until discovery lists every one of them Ready (each
 * Ready proxy has passed a probe through itself), then deleted and awaited gone. A single proxy
 * is measured five times for a median.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runRoles } from '../src/cli/run-roles.ts';
import type { AppConfig } from '../src/config/app.ts';
import { silentLogger } from '../src/logging.ts';
import { startRedisChild } from '../src/redis/redis-server.ts';
import { fmt } from './stats.ts';
import { benchConfig } from './support/app-config.ts';

const SIZES = (process.env.BENCH_PROXIES ?? '1,10,100').split(',').map(Number);

function config(redisUrl: string, dataDir: string): AppConfig {
  return benchConfig(redisUrl, '{bench-proxies}', dataDir, {
    recheckMs: 100,
    worker: { queues: ['reconcile'], concurrency: 10, lockDurationMs: 30_000, stalledIntervalMs: 30_000 },
    shutdownGraceMs: 5000,
    backoffMs: 200,
  });
}

async function until(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function runProxyLifecycleBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-proxies-'));
  const redis = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  const roles = await runRoles(config(redis.url, dir), ['worker', 'api'], silentLogger());
  const api = roles.api?.url ?? '';
  const count = async (q: string): Promise<number> => ((await (await fetch(`${api}/v1/proxies${q}`)).json()) as { items: unknown[] }).items.length;
  const rows: { proxies: number; readyMs: number[]; deleteMs: number }[] = [];
  try {
    let round = 0;
    for (const n of SIZES) {
      const readyMs: number[] = [];
      let deleteMs = 0;
      for (let rep = 0; rep < (n === 1 ? 5 : 1); rep++) {
        const names = Array.from({ length: n }, (_, i) => `b${round}-${i}`);
        round++;
        const yaml = names.map((name) => `metadata: { name: ${name} }\nspec: { provider: local }\n`).join('---\n');
        const t0 = performance.now();
        const res = await fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: yaml });
        if (!res.ok) throw new Error(`apply failed: ${res.status} ${await res.text()}`);
        await until(`${n} proxies Ready`, async () => (await count('?ready=true')) === n, 600_000);
        readyMs.push(performance.now() - t0);
        const t1 = performance.now();
        await Promise.all(names.map((name) => fetch(`${api}/v1/proxies/${name}`, { method: 'DELETE' })));
        await until('every proxy gone', async () => (await count('')) === 0, 600_000);
        deleteMs = performance.now() - t1;
      }
      rows.push({ proxies: n, readyMs: readyMs.sort((a, b) => a - b), deleteMs });
    }
  } finally {
    await roles.close();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
  console.log('apply → Ready on the local provider (each Ready proxy passed a probe through itself); worker concurrency 10');
  console.log('| proxies | apply → all Ready, ms | delete → all gone, ms |');
  console.log('|---|---|---|');
  for (const r of rows) {
    const ready =
      r.readyMs.length > 1
        ? `p50 ${fmt(r.readyMs[Math.floor(r.readyMs.length / 2)] ?? NaN, 0)} (of ${r.readyMs.length}: ${r.readyMs.map((x) => fmt(x, 0)).join(', ')})`
        : fmt(r.readyMs[0] ?? NaN, 0);
    console.log(`| ${r.proxies} | ${ready} | ${fmt(r.deleteMs, 0)} |`);
  }
  console.log(JSON.stringify({ bench: 'proxy-lifecycle', rows }));
}

if (import.meta.url === `file://${process.argv[1]}`) await runProxyLifecycleBench();
