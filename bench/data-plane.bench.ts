/**
 * Requests per second and p99 through one local egress proxy, beside a direct request and beside
 * Debian's tinyproxy and squid (Basic auth each), to the same origin with the same load generator in
 * one run; every row again with one core kept busy by another process; and a 1 GiB download through
 * a CONNECT tunnel of each beside the same download direct.
 *
 *   apt-get install -y tinyproxy squid   (an anchor's rows are skipped, saying so, when it is missing)
 *   npm run bench -- data-plane          (BENCH_REQUESTS=20000, BENCH_CONCURRENCY=20, BENCH_ROW_ROUNDS=3, BENCH_DOWNLOAD_MB=1024, BENCH_DOWNLOAD_ROUNDS=5)
 *
 * Every request row runs BENCH_ROW_ROUNDS times, all rows once a round in alternating order; a row's
 * figures are the medians of its rounds and every ratio the median of its rounds' ratios
 * (bench/support/row-rounds.ts).
 *
 * - origin: a Node HTTP server in its own process on 127.0.0.1 (keep-alive, a 13-byte body; `/big`
 *   answers BENCH_DOWNLOAD_MB MiB from one buffer written over and over);
 * - egress: one proxy of the local provider (the proxy host and its relay processes, its egress
 *   policy allowing 127.0.0.1/32); `egress, accounting off` is the same in a second host started
 *   with `--traffic-domains 0` (no traffic accounting), measured right after it, so the cost of
 *   accounting is the ratio of the two in one run (docs/usage.md#traffic);
 * - tinyproxy, squid: bench/support/anchor-proxies.ts (private configurations, stopped after);
 * - load: bench/data-plane-load.ts, `concurrency` keep-alive connections, one request at a time
 *   each; plain rows send absolute-URI requests to the proxy, CONNECT rows open one tunnel per
 *   connection and send origin-form requests inside it. 500 requests of warm-up per row first;
 * - one core busy: a `node -e "for(;;);"` process spinning while the rows run again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { proxyEgressPolicy } from '../src/egress/policy-config.ts';
import { silentLogger } from '../src/logging.ts';
import { createLocalLifecycle } from '../src/providers/local/lifecycle.ts';
import { runLoad, type LoadMode, type LoadResult } from './data-plane-load.ts';
import { downloadRounds, downloadTable, type BenchTarget, type DownloadRow } from './support/downloads.ts';
import { rowRounds, rowTable, verdicts, type Row, type RowRun } from './support/row-rounds.ts';
import { startSquid, startTinyproxy, type AnchorProxy } from './support/anchor-proxies.ts';
import { childrenOf } from '../test/support/process-children.ts';
import { fmt, median } from './stats.ts';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? '20000');
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? '20');
const DOWNLOAD_MB = Number(process.env.BENCH_DOWNLOAD_MB ?? '1024');
/** Rounds of the downloads, direct and through each proxy in alternating order (BENCH_DOWNLOAD_ROUNDS). */
const DOWNLOAD_ROUNDS = Number(process.env.BENCH_DOWNLOAD_ROUNDS ?? '5');
/** Rounds of the request rows, every row once a round in alternating order (BENCH_ROW_ROUNDS; bench/support/row-rounds.ts). */
const ROW_ROUNDS = Number(process.env.BENCH_ROW_ROUNDS ?? '3');
const WARMUP = 500;
/** Only the rows accounting's cost needs (direct, egress on and off, idle): BENCH_ACCOUNTING_ONLY=1. */
const ACCOUNTING_ONLY = process.env.BENCH_ACCOUNTING_ONLY === '1';
/** Rounds of the paired accounting rows (on, off, off, on, …: drift on a shared machine falls on both alike). */
const ACCOUNTING_ROUNDS = Number(process.env.BENCH_ACCOUNTING_ROUNDS ?? '4');
const USER = 'bench';
const PASSWORD = 'bench-data-plane-pw';

const ORIGIN = `
const http = require('node:http');
const chunk = Buffer.alloc(1 << 20, 120);
const big = ${DOWNLOAD_MB};
const server = http.createServer((req, res) => {
  if (req.url === '/big') {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(big * chunk.length) });
    let left = big;
    const more = () => {
      while (left > 0) {
        left--;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      res.end();
    };
    return more();
  }
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '13' });
  res.end('hello, world\\n');
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;

async function startOrigin(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['-e', ORIGIN], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  return { child, port: Number(line.toString().trim()) };
}

/** A process keeping one core busy while it lives. */
function busyCore(): ChildProcess {
  return spawn(process.execPath, ['-e', 'for (;;);'], { stdio: 'ignore' });
}

async function rssMb(pid: number | undefined): Promise<number> {
  if (pid === undefined) return NaN;
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
}

/** Accounting's cost in one mode: req/s with accounting on and off, round by round. */
interface PairedRow {
  /** `egress proxy host` (the host and its relays, as they run), or `forward-proxy core` (one process, bench/support/core-proxy.ts). */
  what: string;
  mode: LoadMode;
  on: LoadResult[];
  off: LoadResult[];
  /** CPU seconds the proxy host and its relays used in each round (less sensitive than req/s to what else runs). */
  cpuOn: number[];
  cpuOff: number[];
}

/** CPU seconds (user + system) `pid` has used, from /proc (clock ticks of 1/100 s). */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The forward-proxy core alone in a child process (bench/support/core-proxy.ts), accounting `on` or `off`. */
async function startCoreProxy(dir: string, which: 'on' | 'off'): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'support', 'core-proxy.ts'), dir, which], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  return { child, port: Number(line.toString().trim()) };
}

/** CPU seconds of a proxy host and its relays (or of any process and its children). */
async function hostCpu(hostPid: number): Promise<number> {
  const pids = [hostPid, ...(await childrenOf(hostPid))];
  return (await Promise.all(pids.map((pid) => cpuSeconds(pid)))).reduce((a, b) => a + b, 0);
}

export async function runDataPlaneBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-data-plane-'));
  const origin = await startOrigin();
  const egressPolicy = proxyEgressPolicy({ allow: ['127.0.0.1/32'], deny: [] }, undefined);
  const lifecycle = createLocalLifecycle({ dataDir: join(dir, 'local'), logger: silentLogger(), egressPolicy });
  const unaccounted = createLocalLifecycle({ dataDir: join(dir, 'local-off'), logger: silentLogger(), egressPolicy, trafficDomains: 0 });
  const anchors: { name: string; proxy: AnchorProxy }[] = [];
  const rows: Row[] = [];
  const downloads: DownloadRow[] = [];
  const paired: PairedRow[] = [];
  const children: ChildProcess[] = [];
  const rss: Record<string, number> = {};
  let spinner: ChildProcess | undefined;
  try {
    const instance = await lifecycle.ensureInstance(
      { name: 'bench-1', owner: { fleet: 'bench', proxy: 'bench-1' }, credentials: { username: USER, password: PASSWORD } },
      AbortSignal.timeout(60_000),
    );
    const off = await unaccounted.ensureInstance(
      { name: 'bench-off', owner: { fleet: 'bench', proxy: 'bench-off' }, credentials: { username: USER, password: PASSWORD } },
      AbortSignal.timeout(60_000),
    );
    const hostPid = Number(instance.id.split(':')[0]);
    const offHostPid = Number(off.id.split(':')[0]);
    const targets: BenchTarget[] = [
      { name: 'egress local proxy', port: instance.endpoint!.port },
      { name: 'egress, accounting off', port: off.endpoint!.port },
    ];
    for (const [name, start] of ACCOUNTING_ONLY
      ? []
      : ([
          ['tinyproxy (Basic auth)', startTinyproxy],
          ['squid (ncsa Basic auth)', startSquid],
        ] as const)) {
      const anchor = await start(dir, USER, PASSWORD);
      if (typeof anchor === 'string') targets.push({ name, note: anchor });
      else {
        anchors.push({ name, proxy: anchor });
        targets.push({ name, port: anchor.port });
      }
    }
    const o = { host: '127.0.0.1', origin: { host: '127.0.0.1', port: origin.port }, auth: `${USER}:${PASSWORD}`, concurrency: CONCURRENCY };
    const runs: RowRun[] = [
      { row: 'direct (no proxy)', mode: 'direct', port: origin.port },
      ...(['proxy', 'connect'] as const).flatMap((mode) =>
        targets.map((t) => ({
          row: `${t.name}, ${mode === 'proxy' ? 'plain HTTP' : 'CONNECT'}`,
          mode,
          ...(t.port !== undefined ? { port: t.port } : {}),
          ...(t.note !== undefined ? { note: t.note } : {}),
        })),
      ),
    ];
    const measure = async (mode: LoadMode, port: number): Promise<LoadResult> => {
      await runLoad({ ...o, mode, port, requests: WARMUP });
      return runLoad({ ...o, mode, port, requests: REQUESTS });
    };
    for (const load of ACCOUNTING_ONLY ? ['idle'] : ['idle', 'one core busy']) {
      if (load !== 'idle') spinner = busyCore();
      rows.push(...(await rowRounds(runs, load, ACCOUNTING_ONLY ? 1 : ROW_ROUNDS, measure)));
      if (load === 'idle') {
        const core = { on: await startCoreProxy(dir, 'on'), off: await startCoreProxy(dir, 'off') };
        children.push(core.on.child, core.off.child);
        const sides = [
          { what: 'egress proxy host', on: { port: instance.endpoint!.port, pid: hostPid }, off: { port: off.endpoint!.port, pid: offHostPid } },
          { what: 'forward-proxy core', on: { port: core.on.port, pid: core.on.child.pid! }, off: { port: core.off.port, pid: core.off.child.pid! } },
        ];
        for (const side of sides) {
          for (const mode of ['proxy', 'connect'] as const) {
            const pair: PairedRow = { what: side.what, mode, on: [], off: [], cpuOn: [], cpuOff: [] };
            for (let round = 0; round < ACCOUNTING_ROUNDS; round++) {
              const order = round % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const);
              for (const which of order) {
                const { port, pid } = side[which];
                await runLoad({ ...o, mode, port, requests: WARMUP });
                const cpuBefore = await hostCpu(pid);
                pair[which].push(await runLoad({ ...o, mode, port, requests: REQUESTS }));
                (which === 'on' ? pair.cpuOn : pair.cpuOff).push((await hostCpu(pid)) - cpuBefore);
              }
            }
            paired.push(pair);
          }
        }
      }
      if (spinner) {
        spinner.kill('SIGKILL');
        await once(spinner, 'exit');
        spinner = undefined;
      }
    }
    const d = { host: '127.0.0.1', origin: o.origin, auth: o.auth, path: '/big', bytes: DOWNLOAD_MB * (1 << 20) };
    downloads.push(...(await downloadRounds(targets, d, origin.port, DOWNLOAD_ROUNDS)));
    rss['egress proxy host'] = await rssMb(hostPid);
    const relays = await childrenOf(hostPid);
    rss[`egress relays (${relays.length})`] = (await Promise.all(relays.map((pid) => rssMb(pid)))).reduce((a, b) => a + b, 0);
    for (const a of anchors) rss[a.name] = await rssMb(a.proxy.child.pid);
    await lifecycle.deleteInstance('bench-1', undefined, { owner: { fleet: 'bench', proxy: 'bench-1' }, nameIsOurs: true }, AbortSignal.timeout(60_000));
    await unaccounted.deleteInstance('bench-off', undefined, { owner: { fleet: 'bench', proxy: 'bench-off' }, nameIsOurs: true }, AbortSignal.timeout(60_000));
  } finally {
    spinner?.kill('SIGKILL');
    for (const child of children) child.kill('SIGTERM');
    lifecycle.close();
    unaccounted.close();
    for (const a of anchors) await a.proxy.stop();
    origin.child.kill('SIGTERM');
    await once(origin.child, 'exit');
    await rm(dir, { recursive: true, force: true });
  }
  console.log(
    `data plane: ${REQUESTS} requests per row after ${WARMUP} of warm-up, ${CONCURRENCY} keep-alive connections, one load generator (bench/data-plane-load.ts) for every row; ${ACCOUNTING_ONLY ? 1 : ROW_ROUNDS} rounds, every row once a round in alternating order`,
  );
  for (const line of rowTable(rows)) console.log(line);
  console.log(
    `\naccounting's cost, idle: ${ACCOUNTING_ROUNDS} rounds of ${REQUESTS} requests each way, on and off alternating (on off, off on, …); CPU: the proxy's processes, from /proc`,
  );
  console.log(
    '| proxy | mode | req/s on (each round) | req/s off (each round) | on/off per round | on/off, all rounds | p99 ms on / off (median) | proxy CPU µs per request on / off | CPU on/off |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const p of paired) {
    const total = (rs: LoadResult[]): number => rs.reduce((n, r) => n + r.requests, 0) / rs.reduce((n, r) => n + r.seconds, 0);
    console.log(
      `| ${p.what} | ${p.mode === 'proxy' ? 'plain HTTP' : 'CONNECT'} | ${p.on.map((r) => fmt(r.rps, 0)).join(', ')} | ${p.off.map((r) => fmt(r.rps, 0)).join(', ')} | ` +
        `${p.on.map((r, i) => fmt(r.rps / (p.off[i]?.rps ?? NaN))).join(', ')} | **${fmt(total(p.on) / total(p.off))}×** | ${fmt(median(p.on.map((r) => r.p99Ms)))} / ${fmt(median(p.off.map((r) => r.p99Ms)))} | ` +
        `${fmt(cpuPerRequest(p.cpuOn, p.on), 1)} / ${fmt(cpuPerRequest(p.cpuOff, p.off), 1)} | **${fmt(cpuPerRequest(p.cpuOn, p.on) / cpuPerRequest(p.cpuOff, p.off))}×** |`,
    );
  }
  for (const line of downloadTable(downloads, DOWNLOAD_MB, DOWNLOAD_ROUNDS)) console.log(line);
  console.log(
    `\nresident memory after the run: ${Object.entries(rss)
      .map(([k, v]) => `${k} ${fmt(v, 1)} MB`)
      .join(', ')}`,
  );
  for (const line of verdicts(rows)) console.log(line);
  console.log(
    JSON.stringify({
      bench: 'data-plane',
      requests: REQUESTS,
      concurrency: CONCURRENCY,
      rows: rows.map((r) => ({ row: r.row, mode: r.mode, load: r.load, ...(r.result ?? {}), rounds: r.rounds, ...(r.note ? { skipped: r.note } : {}) })),
      downloads: downloads.map((r) => ({ row: r.row, rounds: r.results, ratios: r.ratios, ...(r.note ? { skipped: r.note } : {}) })),
      accounting: paired,
      rssMb: rss,
    }),
  );
}

/** Microseconds of proxy CPU per request over all rounds. */
function cpuPerRequest(cpu: number[], results: LoadResult[]): number {
  return (cpu.reduce((a, b) => a + b, 0) * 1e6) / results.reduce((n, r) => n + r.requests, 0);
}

if (import.meta.url === `file://${process.argv[1]}`) await runDataPlaneBench();
