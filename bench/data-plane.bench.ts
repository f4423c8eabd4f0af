/**
 * Requests per second and p99 through one local egress proxy, beside a direct request and beside
 * Debian's tinyproxy (Basic auth), to the same origin with the same load generator in one run.
 *
 *   apt-get install -y tinyproxy      (the tinyproxy rows are skipped, saying so, when it is missing)
 *   npm run bench -- data-plane       (BENCH_REQUESTS=20000, BENCH_CONCURRENCY=20)
 *
 * - origin: a Node HTTP server in its own process on 127.0.0.1 (keep-alive, a 13-byte body);
 * - egress: one proxy of the local provider (the proxy host, its egress policy allowing 127.0.0.1/32);
 * - tinyproxy: started here with a private configuration in a temporary directory (Basic auth,
 *   loopback only), stopped after — never the system service;
 * - load: bench/data-plane-load.ts, `concurrency` keep-alive connections, one request at a time
 *   each; plain rows send absolute-URI requests to the proxy, CONNECT rows open one tunnel per
 *   connection and send origin-form requests inside it. 500 requests of warm-up per row first.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { proxyEgressPolicy } from '../src/egress/policy-config.ts';
import { silentLogger } from '../src/logging.ts';
import { createLocalLifecycle } from '../src/providers/local/lifecycle.ts';
import { runLoad, type LoadMode, type LoadResult } from './data-plane-load.ts';
import { fmt } from './stats.ts';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? '20000');
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? '20');
const WARMUP = 500;
const USER = 'bench';
const PASSWORD = 'bench-data-plane-pw';

const ORIGIN = `
const http = require('node:http');
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '13' });
  res.end('hello, world\\n');
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function startOrigin(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['-e', ORIGIN], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  return { child, port: Number(line.toString().trim()) };
}

function portAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function which(program: string): Promise<string | undefined> {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':').concat('/usr/sbin', '/usr/bin')) {
    const path = join(dir, program);
    if (
      await readFile(path).then(
        () => true,
        () => false,
      )
    )
      return path;
  }
  return undefined;
}

/** tinyproxy in the foreground with a private configuration; undefined (and why) when it is not installed. */
async function startTinyproxy(dir: string): Promise<{ child: ChildProcess; port: number } | string> {
  const program = await which('tinyproxy');
  if (!program) return 'tinyproxy is not installed: `apt-get install -y tinyproxy` (Debian/Ubuntu) to add its rows';
  const port = await freePort();
  const conf = join(dir, 'tinyproxy.conf');
  await writeFile(
    conf,
    [
      `Port ${port}`,
      'Listen 127.0.0.1',
      'Timeout 600',
      'MaxClients 1000',
      `BasicAuth ${USER} ${PASSWORD}`,
      'LogLevel Error',
      `LogFile "${join(dir, 'tinyproxy.log')}"`,
      `PidFile "${join(dir, 'tinyproxy.pid')}"`,
      'DisableViaHeader Yes',
      '',
    ].join('\n'),
  );
  const child = spawn(program, ['-d', '-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const deadline = Date.now() + 10_000;
  while (!(await portAccepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      return `tinyproxy did not start: ${stderr.trim() || `exit ${child.exitCode}`}`;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, port };
}

async function rssMb(pid: number | undefined): Promise<number> {
  if (pid === undefined) return NaN;
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
}

interface Row {
  row: string;
  mode: LoadMode;
  result?: LoadResult;
  note?: string;
}

export async function runDataPlaneBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-data-plane-'));
  const origin = await startOrigin();
  const lifecycle = createLocalLifecycle({
    dataDir: join(dir, 'local'),
    logger: silentLogger(),
    egressPolicy: proxyEgressPolicy({ allow: ['127.0.0.1/32'], deny: [] }, undefined),
  });
  const tiny = await startTinyproxy(dir);
  const rows: Row[] = [];
  let egressRss = NaN;
  let tinyRss = NaN;
  try {
    const instance = await lifecycle.ensureInstance(
      { name: 'bench-1', owner: { fleet: 'bench', proxy: 'bench-1' }, credentials: { username: USER, password: PASSWORD } },
      AbortSignal.timeout(60_000),
    );
    const egressPort = instance.endpoint!.port;
    const hostPid = Number(instance.id.split(':')[0]);
    const o = { host: '127.0.0.1', origin: { host: '127.0.0.1', port: origin.port }, auth: `${USER}:${PASSWORD}`, concurrency: CONCURRENCY };
    const measure = async (row: string, mode: LoadMode, port: number): Promise<void> => {
      await runLoad({ ...o, mode, port, requests: WARMUP });
      rows.push({ row, mode, result: await runLoad({ ...o, mode, port, requests: REQUESTS }) });
    };
    await measure('direct (no proxy)', 'direct', origin.port);
    await measure('egress local proxy, plain HTTP', 'proxy', egressPort);
    if (typeof tiny === 'string') rows.push({ row: 'tinyproxy, plain HTTP', mode: 'proxy', note: tiny });
    else await measure('tinyproxy (Basic auth), plain HTTP', 'proxy', tiny.port);
    await measure('egress local proxy, CONNECT', 'connect', egressPort);
    if (typeof tiny === 'string') rows.push({ row: 'tinyproxy, CONNECT', mode: 'connect', note: tiny });
    else await measure('tinyproxy (Basic auth), CONNECT', 'connect', tiny.port);
    egressRss = await rssMb(hostPid);
    if (typeof tiny !== 'string') tinyRss = await rssMb(tiny.child.pid);
    await lifecycle.deleteInstance('bench-1', undefined, { owner: { fleet: 'bench', proxy: 'bench-1' }, nameIsOurs: true }, AbortSignal.timeout(60_000));
  } finally {
    lifecycle.close();
    if (typeof tiny !== 'string') {
      tiny.child.kill('SIGTERM');
      await once(tiny.child, 'exit');
    }
    origin.child.kill('SIGTERM');
    await once(origin.child, 'exit');
    await rm(dir, { recursive: true, force: true });
  }
  console.log(
    `data plane: ${REQUESTS} requests per row after ${WARMUP} of warm-up, ${CONCURRENCY} keep-alive connections, one load generator (bench/data-plane-load.ts) for every row`,
  );
  console.log('| row | req/s | p50 ms | p99 ms | errors | connections the server closed |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) {
    if (!r.result) console.log(`| ${r.row} | n/a | n/a | n/a | ${r.note ?? ''} | |`);
    else console.log(`| ${r.row} | ${fmt(r.result.rps, 0)} | ${fmt(r.result.p50Ms)} | ${fmt(r.result.p99Ms)} | ${r.result.errors} | ${r.result.reconnects} |`);
  }
  console.log(`resident memory after the run: egress proxy host ${fmt(egressRss, 1)} MB, tinyproxy ${fmt(tinyRss, 1)} MB`);
  console.log(
    JSON.stringify({
      bench: 'data-plane',
      requests: REQUESTS,
      concurrency: CONCURRENCY,
      rows: rows.map((r) => ({ row: r.row, mode: r.mode, ...(r.result ?? {}), ...(r.note ? { skipped: r.note } : {}) })),
      rssMb: { egressHost: egressRss, tinyproxy: tinyRss },
    }),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await runDataPlaneBench();
