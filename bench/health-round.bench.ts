/**
 * One KVM health-check round over N hosts with pooled connections (N = 1, 10, 100, 500).
 *
 *   npm run bench -- health-round
 *
 * Hosts are simulated behind real SSH: an in-process ssh2 server in front of the fake libvirt
 * daemon, in a child process (so this process measures only the client side). Every host is its
 * own SSH connection + streamlocal channel + libvirt connection, dialled in the first round.
 * Reported: first-round latency (dials included), the median and worst of the next rounds,
 * dials per round after the first (from proxy_operator_kvm_dials_total), and client memory per
 * host connection (heap + external + array buffers after GC, divided by N).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { silentLogger } from '../src/logging.ts';
import { createRegistry } from '../src/metrics/registry.ts';
import { kvmHostSchema } from '../src/providers/kvm/config.ts';
import { createKvmProvider } from '../src/providers/kvm/index.ts';
import { fmt } from './stats.ts';

const SIZES = (process.env.BENCH_HOSTS ?? '1,10,100,500').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

function memory(): number {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return m.heapUsed + m.external + m.arrayBuffers;
}

async function dialsTotal(registry: ReturnType<typeof createRegistry>): Promise<number> {
  const metric = await registry.getSingleMetric('proxy_operator_kvm_dials_total')?.get();
  return (metric?.values ?? []).filter((v) => v.labels.outcome === 'ok').reduce((a, v) => a + v.value, 0);
}

interface Row {
  hosts: number;
  firstRoundMs: number;
  roundP50Ms: number;
  roundMaxMs: number;
  dialsAfterFirst: number;
  notReady: number;
  kibPerHost: number;
}

async function measure(n: number, server: { port: number; keyFile: string; knownHostsFile: string }): Promise<Row> {
  const registry = createRegistry();
  const hosts = Array.from({ length: n }, (_, i) =>
    kvmHostSchema.parse({ name: `h${i}`, address: '127.0.0.1', port: server.port, privateKeyFile: server.keyFile, knownHostsFile: server.knownHostsFile }),
  );
  const provider = createKvmProvider({ name: 'bench', type: 'kvm', hosts, idleTimeout: 600_000 }, { logger: silentLogger(), registry, dataDir: '/tmp' });
  const before = memory();
  let t = performance.now();
  const first = await provider.check(AbortSignal.timeout(120_000));
  const firstRoundMs = performance.now() - t;
  const dialsAfterFirstRound = await dialsTotal(registry);
  const after = memory();
  const rounds: number[] = [];
  let notReady = first.filter((r) => !r.ready).length;
  for (let i = 0; i < ROUNDS; i++) {
    t = performance.now();
    const results = await provider.check(AbortSignal.timeout(60_000));
    rounds.push(performance.now() - t);
    notReady += results.filter((r) => !r.ready).length;
  }
  const dialsAfterFirst = (await dialsTotal(registry)) - dialsAfterFirstRound;
  await provider.close();
  rounds.sort((a, b) => a - b);
  return {
    hosts: n,
    firstRoundMs,
    roundP50Ms: rounds[Math.floor(rounds.length / 2)] ?? Number.NaN,
    roundMaxMs: rounds.at(-1) ?? Number.NaN,
    dialsAfterFirst,
    notReady,
    kibPerHost: (after - before) / n / 1024,
  };
}

export async function runHealthRoundBench(): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/support/fake-kvm-hosts.ts'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
  const server = JSON.parse(line) as { port: number; keyFile: string; knownHostsFile: string };
  const rows: Row[] = [];
  try {
    for (const n of SIZES) rows.push(await measure(n, server));
  } finally {
    child.stdin.end();
    await once(child, 'exit');
  }
  const gc = typeof (globalThis as { gc?: unknown }).gc === 'function';
  console.log(
    `KVM health round over N hosts — ${ROUNDS} rounds after the first; hosts behind an in-process ssh2 server + fake libvirt in a child process${gc ? '' : ' (run with --expose-gc for exact memory)'}`,
  );
  console.log(
    '| hosts | first round (dials), ms | round p50, ms | round max, ms | dials after the first round | not-ready results | client memory per host, KiB |',
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.hosts} | ${fmt(r.firstRoundMs, 0)} | ${fmt(r.roundP50Ms, 1)} | ${fmt(r.roundMaxMs, 1)} | ${r.dialsAfterFirst} | ${r.notReady} | ${fmt(r.kibPerHost, 1)} |`,
    );
  }
  console.log(JSON.stringify({ bench: 'health-round', rounds: ROUNDS, rows }));
}

if (import.meta.url === `file://${process.argv[1]}`) await runHealthRoundBench();
