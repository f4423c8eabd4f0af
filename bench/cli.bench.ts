/**
 * Start-up cost of the `egress` command (`npm run bench -- cli`): `egress --help` and `egress get ph`
 * against a running API, each run as a fresh `node bin/egress.js` process, median of 20 (`BENCH_RUNS`),
 * beside bare `node -e 0` in the same run (rounds interleaved, so every row sees the same load).
 * The compiled tree (dist/, `npm run build` first) is the product; the same commands from the
 * TypeScript sources through tsx (EGRESS_FROM_SOURCE=1, what every call cost before the build)
 * are measured for comparison. Target (issue 11): compiled `--help` within 4x of bare node.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { runRoles } from '../src/cli/run-roles.ts';
import { silentLogger } from '../src/logging.ts';
import { startRedisChild } from '../src/redis/redis-server.ts';
import { fmt, summarize } from './stats.ts';
import { benchConfig } from './support/app-config.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin/egress.js');
const RUNS = Number(process.env.BENCH_RUNS ?? 20);

async function timed(args: string[], env: Record<string, string>): Promise<number> {
  const t0 = performance.now();
  await run(process.execPath, args, { cwd: ROOT, env: { ...process.env, EGRESS_FROM_SOURCE: '', ...env } });
  return performance.now() - t0;
}

export async function runCliBench(): Promise<void> {
  if (!existsSync(join(ROOT, 'dist/src/cli/main.js'))) throw new Error('no compiled tree: run `npm run build` first');
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-cli-'));
  const redis = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  const roles = await runRoles(benchConfig(redis.url, '{bench-cli}', dir), ['api'], silentLogger());
  const api = roles.api?.url ?? '';
  const cases: { name: string; args: string[]; env: Record<string, string> }[] = [
    { name: 'node -e 0', args: ['-e', '0'], env: {} },
    { name: 'egress --help (compiled)', args: [BIN, '--help'], env: {} },
    { name: 'egress get ph (compiled)', args: [BIN, 'get', 'ph', '--api-url', api], env: {} },
    { name: 'egress --help (sources through tsx)', args: [BIN, '--help'], env: { EGRESS_FROM_SOURCE: '1' } },
    { name: 'egress get ph (sources through tsx)', args: [BIN, 'get', 'ph', '--api-url', api], env: { EGRESS_FROM_SOURCE: '1' } },
  ];
  const samples = cases.map(() => [] as number[]);
  try {
    for (const c of cases) await timed(c.args, c.env); // warm the page cache
    for (let i = 0; i < RUNS; i++) for (const [k, c] of cases.entries()) samples[k]?.push(await timed(c.args, c.env));
  } finally {
    await roles.close();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
  const node = summarize(samples[0] ?? []).p50;
  console.log(`egress start-up, median of ${RUNS} fresh processes each (rounds interleaved)`);
  console.log('| command | p50, ms | p99, ms | × node -e 0 |');
  console.log('|---|---|---|---|');
  const rows = cases.map((c, k) => ({ command: c.name, ...summarize(samples[k] ?? []) }));
  for (const r of rows) console.log(`| ${r.command} | ${fmt(r.p50, 0)} | ${fmt(r.p99, 0)} | ${fmt(r.p50 / node, 1)} |`);
  console.log(JSON.stringify({ bench: 'cli', rows }));
}
