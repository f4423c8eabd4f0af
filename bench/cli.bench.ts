/**
 * Start-up cost of the `egress` command (`npm run bench -- cli`): `--help`, `--version`, `get ph` and
 * `get proxies` against a running API, each run as a fresh `node bin/egress.js` process, beside bare
 * `node -e 0` in the same run (rounds interleaved, so every row sees the same load). Per row: the
 * median wall time, the median CPU time (user + system, as the process itself counts it at exit) and
 * the peak resident memory, with CPU as a multiple of `node -e 0`'s. The compiled tree (dist/, `npm run
 * build` first) is the product; `--help` from the TypeScript sources through tsx is shown for
 * comparison. Target (issue 27): every compiled row within 4x of bare node in CPU time.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { runRoles } from '../src/cli/run-roles.ts';
import { silentLogger } from '../src/logging.ts';
import { freePort, startRedisChild } from '../src/redis/redis-server.ts';
import { readTokenFile } from '../src/cli/local-api-access.ts';
import { fmt, summarize } from './stats.ts';
import { benchConfig } from './support/app-config.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin/egress.js');
const USAGE = join(ROOT, 'bench/support/resource-usage.cjs');
const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const UP_RUNS = Number(process.env.BENCH_UP_RUNS ?? 5);

interface Sample {
  wallMs: number;
  cpuMs: number;
  maxRssKb: number;
}

async function timed(args: string[], env: Record<string, string>, usageFile: string): Promise<Sample> {
  await writeFile(usageFile, '');
  const t0 = performance.now();
  await run(process.execPath, ['--require', USAGE, ...args], {
    cwd: ROOT,
    env: { ...process.env, EGRESS_FROM_SOURCE: '', EGRESS_BENCH_USAGE: usageFile, ...env },
  });
  const wallMs = performance.now() - t0;
  const usage = JSON.parse((await readFile(usageFile, 'utf8')).trim()) as { cpuMs: number; maxRssKb: number };
  return { wallMs, ...usage };
}

/** Milliseconds from spawning `egress up` (compiled, its own Redis, a fresh data dir) to its first 200 on /readyz. */
async function upToReady(dir: string): Promise<number> {
  const dataDir = await mkdtemp(join(dir, 'up-'));
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(process.execPath, [BIN, 'up', '--data-dir', dataDir, '--port', String(port)], {
    cwd: ROOT,
    env: { ...process.env, EGRESS_FROM_SOURCE: '', EGRESS_LOG_LEVEL: 'warn' },
    stdio: 'ignore',
  });
  const exited = once(child, 'exit');
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`egress up exited with ${child.exitCode}`);
      const token = await readTokenFile(join(dataDir, 'api-token')).catch(() => undefined);
      const status = token
        ? await fetch(`http://127.0.0.1:${port}/readyz`, { headers: { authorization: `Bearer ${token}` } }).then(
            (r) => r.status,
            () => 0,
          )
        : 0;
      if (status === 200) return performance.now() - t0;
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

export async function runCliBench(): Promise<void> {
  if (!existsSync(join(ROOT, 'dist/src/cli/main.js'))) throw new Error('no compiled tree: run `npm run build` first');
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-cli-'));
  const usageFile = join(dir, 'usage.jsonl');
  const redis = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  const roles = await runRoles(benchConfig(redis.url, '{bench-cli}', dir), ['api'], silentLogger());
  const api = roles.api?.url ?? '';
  const cases: { name: string; args: string[]; env: Record<string, string> }[] = [
    { name: 'node -e 0', args: ['-e', '0'], env: {} },
    { name: 'egress --help', args: [BIN, '--help'], env: {} },
    { name: 'egress --version', args: [BIN, '--version'], env: {} },
    { name: 'egress get ph', args: [BIN, 'get', 'ph', '--api-url', api], env: {} },
    { name: 'egress get proxies', args: [BIN, 'get', 'proxies', '--api-url', api], env: {} },
    { name: 'egress --help (sources through tsx)', args: [BIN, '--help'], env: { EGRESS_FROM_SOURCE: '1' } },
  ];
  const samples = cases.map(() => [] as Sample[]);
  try {
    for (const c of cases) await timed(c.args, c.env, usageFile); // warm the page cache
    for (let i = 0; i < RUNS; i++) for (const [k, c] of cases.entries()) samples[k]?.push(await timed(c.args, c.env, usageFile));
  } finally {
    await roles.close();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
  const median = (k: number, field: keyof Sample): number => summarize((samples[k] ?? []).map((s) => s[field])).p50;
  const nodeCpu = median(0, 'cpuMs');
  console.log(`egress start-up, medians of ${RUNS} fresh processes each (rounds interleaved)`);
  console.log('| command | wall p50, ms | CPU p50, ms | CPU × node -e 0 | peak RSS p50, MB |');
  console.log('|---|---|---|---|---|');
  const rows = cases.map((c, k) => ({
    command: c.name,
    wallMs: median(k, 'wallMs'),
    cpuMs: median(k, 'cpuMs'),
    cpuVsNode: median(k, 'cpuMs') / nodeCpu,
    maxRssMb: median(k, 'maxRssKb') / 1024,
  }));
  for (const r of rows) console.log(`| ${r.command} | ${fmt(r.wallMs, 0)} | ${fmt(r.cpuMs, 0)} | ${fmt(r.cpuVsNode, 1)} | ${fmt(r.maxRssMb, 0)} |`);
  const ups: number[] = [];
  const upDir = await mkdtemp(join(tmpdir(), 'egress-bench-up-'));
  try {
    for (let i = 0; i < UP_RUNS; i++) ups.push(await upToReady(upDir));
  } finally {
    await rm(upDir, { recursive: true, force: true });
  }
  const up = summarize(ups);
  console.log(`\negress up (compiled, its own Redis, a fresh data dir) to /readyz 200: p50 ${fmt(up.p50, 0)} ms, max ${fmt(up.p99, 0)} ms of ${up.n}`);
  console.log(JSON.stringify({ bench: 'cli', rows, upToReadyMs: ups }));
}
