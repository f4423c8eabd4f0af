/**
 * How fast a bad proxy leaves discovery, and what probing costs.
 *
 *   npm run bench -- eviction     # BENCH_REPS=5, BENCH_PROBE_SIZES=100,1000 (0: skip part 2)
 *
 * Part 1, at the defaults (--probe-interval 5s, --probe-timeout 2s, --probe-failures 1,
 * --probe-successes 2, reconcile recheck 2 s, resync off): `egress up`'s worker and API in this
 * process (own private redis-server), one local proxy (a real detached process). Each repetition
 * sends a signal to the proxy's process and polls discovery (`GET /v1/proxies?ready=true`, every
 * 20 ms, as a crawler would) until the proxy is absent, then until it is back:
 *   SIGSTOP → absent, SIGCONT → back (the same process, two passed probes);
 *   SIGKILL → absent (the exit watch), → back (a new process, one passed probe).
 *
 * Part 2, the probing cost at N Ready proxies (N from BENCH_PROBE_SIZES): the probe loop of one
 * worker over N Ready proxy records, every one probed for real (TCP connect, GET of the echo through
 * a forward proxy) at --probe-interval 5s for BENCH_PROBE_WINDOW_S (default 30) seconds. The forward
 * proxy and the echo run in a child process, so this process's CPU is the worker's probing alone.
 * Figures: probes per second, worker CPU (user+system) per probe, Redis commands per probe (INFO
 * commandstats delta over the window, everything this process sent: claims, writes, the listing each
 * interval).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { runRoles } from '../src/cli/run-roles.ts';
import { silentLogger } from '../src/logging.ts';
import { withReadyCondition } from '../src/proxies/conditions.ts';
import type { ProxyView } from '../src/proxies/discovery.ts';
import { ProbeLoop } from '../src/readiness/probe-loop.ts';
import { RedisProbeClaims } from '../src/readiness/redis-probe-claims.ts';
import { reconcileProbe } from '../src/readiness/reconcile-probe.ts';
import { startRedisChild } from '../src/redis/redis-server.ts';
import { RedisProxyStore } from '../src/store/redis-proxy-store.ts';
import { fmt, summarize } from './stats.ts';
import { benchConfig } from './support/app-config.ts';
import { childrenOf } from '../test/support/process-children.ts';

const REPS = Number(process.env.BENCH_REPS ?? 5);
const PROBE_SIZES = (process.env.BENCH_PROBE_SIZES ?? '100,1000')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const WINDOW_S = Number(process.env.BENCH_PROBE_WINDOW_S ?? 30);
const DEFAULTS = { failureThreshold: 1, successThreshold: 2, replaceAfterMs: 300_000, intervalMs: 5000, timeoutMs: 2000 };

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Sample {
  absentMs: number;
  backMs: number;
}

async function evictionTimes(): Promise<{ stop: Sample[]; kill: Sample[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-evict-'));
  const redis = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  const config = benchConfig(redis.url, '{bench-evict}', dir, {
    recheckMs: 2000,
    readiness: DEFAULTS,
    worker: { queues: ['reconcile'], concurrency: 10, lockDurationMs: 30_000, stalledIntervalMs: 30_000 },
  });
  const roles = await runRoles(config, ['worker', 'api'], silentLogger());
  const api = roles.api?.url ?? '';
  const view = async (): Promise<ProxyView | undefined> => {
    const { items } = (await (await fetch(`${api}/v1/proxies?ready=true`)).json()) as { items: ProxyView[] };
    return items.find((p) => p.name === 'evict-1');
  };
  const stop: Sample[] = [];
  const kill: Sample[] = [];
  let stoppedPids: number[] = [];
  // The instance id is `<proxy host pid>:<port>`.
  const hostPidOf = (v: { status: { instanceId?: string } }): number => Number(v.status.instanceId?.split(':')[0]);
  try {
    const res = await fetch(`${api}/v1/proxies`, {
      method: 'POST',
      headers: { 'content-type': 'application/yaml' },
      body: 'metadata: { name: evict-1 }\nspec: { provider: local }\n',
    });
    if (!res.ok) throw new Error(`apply failed: ${res.status}`);
    for (let rep = 0; rep < REPS; rep++) {
      let pid = hostPidOf(await until('Ready', view, 120_000));
      // A random phase against the probe loop, as a real failure would have.
      await new Promise((r) => setTimeout(r, Math.random() * DEFAULTS.intervalMs));
      let t0 = performance.now();
      // The host and its relays all accept the proxy's connections: it hangs only when all are stopped.
      stoppedPids = [pid, ...(await childrenOf(pid))];
      for (const p of stoppedPids) process.kill(p, 'SIGSTOP');
      await until('absent after SIGSTOP', async () => ((await view()) ? undefined : true), 120_000);
      const stopAbsent = performance.now() - t0;
      t0 = performance.now();
      for (const p of stoppedPids) process.kill(p, 'SIGCONT');
      stoppedPids = [];
      await until('back after SIGCONT', view, 120_000);
      stop.push({ absentMs: stopAbsent, backMs: performance.now() - t0 });

      const before = await until('Ready', view, 120_000);
      pid = hostPidOf(before);
      await new Promise((r) => setTimeout(r, Math.random() * DEFAULTS.intervalMs));
      t0 = performance.now();
      process.kill(pid, 'SIGKILL');
      await until('absent after SIGKILL', async () => ((await view()) ? undefined : true), 120_000);
      const killAbsent = performance.now() - t0;
      await until(
        'back after SIGKILL',
        async () => {
          const v = await view();
          return v && v.status.instanceId !== before.status.instanceId ? v : undefined;
        },
        120_000,
      );
      kill.push({ absentMs: killAbsent, backMs: performance.now() - t0 });
    }
    await fetch(`${api}/v1/proxies/evict-1`, { method: 'DELETE' });
    await until('gone', async () => ((await fetch(`${api}/v1/proxies/evict-1`)).status === 404 ? true : undefined), 60_000);
  } finally {
    for (const p of stoppedPids) process.kill(p, 'SIGCONT');
    await roles.close();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
  return { stop, kill };
}

const CHILD = `
const http = require('node:http');
const { Server } = require('proxy-chain');
const echo = http.createServer((req, res) => {
  const body = JSON.stringify({ address: req.socket.remoteAddress });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
const proxy = new Server({ host: '127.0.0.1', port: 0, prepareRequestFunction: () => ({ requestAuthentication: false }) });
echo.listen(0, '127.0.0.1', async () => {
  await proxy.listen();
  process.stdout.write(JSON.stringify({ proxyPort: proxy.port, echoPort: echo.address().port }) + '\\n');
});
`;

/** The probed side in a child process: a forward proxy accepting any credentials, and an echo. */
async function startProbedSide(): Promise<{ child: ChildProcess; proxyPort: number; echoUrl: string }> {
  const child = spawn(process.execPath, ['-e', CHILD], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`probed side exited (${code})`)));
  });
  const { proxyPort, echoPort } = JSON.parse(line) as { proxyPort: number; echoPort: number };
  return { child, proxyPort, echoUrl: `http://127.0.0.1:${echoPort}/v1/echo` };
}

async function commandCalls(redis: Redis): Promise<{ total: number; byCommand: Map<string, number> }> {
  const info = await redis.info('commandstats');
  const byCommand = new Map<string, number>();
  let total = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const n = Number(m[2]);
    byCommand.set(m[1] ?? '', n);
    total += n;
  }
  return { total, byCommand };
}

interface CostRow {
  proxies: number;
  probes: number;
  failed: number;
  probesPerSecond: number;
  cpuMsPerProbe: number;
  redisCommandsPerProbe: number;
  claimsPerProbe: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
}

async function probingCost(n: number): Promise<CostRow> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-probe-'));
  const redisChild = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  const redis = new Redis(redisChild.url);
  const loopRedis = new Redis(redisChild.url);
  const prefix = '{bench-probe}';
  const storeRedis = redis.duplicate();
  const store = new RedisProxyStore(storeRedis, prefix);
  const probed = await startProbedSide();
  let loop: ProbeLoop | undefined;
  try {
    for (let i = 0; i < n; i++) {
      const name = `p-${i}`;
      await store.apply({ metadata: { name, labels: {} }, spec: { provider: 'local' } });
      await store.updateStatus(name, (p) =>
        withReadyCondition(
          {
            ...p.status,
            phase: 'Ready',
            url: `http://127.0.0.1:${probed.proxyPort}`,
            egressIp: '127.0.0.1',
            instanceId: 'bench',
            probeFailures: 0,
            observedGeneration: 1,
          },
          new Date(),
        ),
      );
    }
    let probes = 0;
    let failed = 0;
    const latencies: number[] = [];
    loop = new ProbeLoop({
      proxies: store,
      claims: new RedisProbeClaims(loopRedis, prefix),
      intervalMs: DEFAULTS.intervalMs,
      rules: DEFAULTS,
      probe: reconcileProbe(store, () => probed.echoUrl, DEFAULTS.timeoutMs),
      requestReconcile: async () => undefined,
      logger: silentLogger(),
    });
    let counting = false;
    loop.on('probed', (e) => {
      if (!counting) return;
      probes++;
      if (!e.verdict.ok) failed++;
      if (e.verdict.durationSeconds !== undefined) latencies.push(e.verdict.durationSeconds * 1000);
    });
    loop.start();
    // One interval to spread the first probes over their random phases, then measure.
    await new Promise((r) => setTimeout(r, DEFAULTS.intervalMs + 500));
    const before = await commandCalls(redis);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    counting = true;
    await new Promise((r) => setTimeout(r, WINDOW_S * 1000));
    counting = false;
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const after = await commandCalls(redis);
    // Minus the INFO call that took the first count (counted in the second).
    const commands = after.total - before.total - 1;
    const claims = (after.byCommand.get('set') ?? 0) - (before.byCommand.get('set') ?? 0);
    const lat = summarize(latencies);
    return {
      proxies: n,
      probes,
      failed,
      probesPerSecond: probes / seconds,
      cpuMsPerProbe: (cpu.user + cpu.system) / 1000 / Math.max(1, probes),
      redisCommandsPerProbe: commands / Math.max(1, probes),
      claimsPerProbe: claims / Math.max(1, probes),
      latencyP50Ms: lat.p50,
      latencyP99Ms: lat.p99,
    };
  } finally {
    await loop?.close();
    probed.child.kill('SIGTERM');
    await store.close();
    storeRedis.disconnect();
    redis.disconnect();
    loopRedis.disconnect();
    await redisChild.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

export async function runEvictionBench(): Promise<void> {
  const { stop, kill } = await evictionTimes();
  const row = (label: string, samples: number[], target?: string): string => {
    const s = summarize(samples);
    return `| ${label} | ${fmt(s.p50, 0)} | ${fmt(Math.max(...samples), 0)} | ${samples.map((x) => fmt(x, 0)).join(', ')} | ${target ?? ''} |`;
  };
  console.log(
    `Eviction at the defaults (--probe-interval 5s, --probe-timeout 2s, --probe-failures 1, --probe-successes 2), one local proxy, ${REPS} repetitions; discovery polled every 20 ms`,
  );
  console.log('| event | p50, ms | max, ms | samples, ms | target |');
  console.log('|---|---|---|---|---|');
  console.log(
    row(
      'SIGSTOP → absent from discovery',
      stop.map((s) => s.absentMs),
      '≤ 10 000',
    ),
  );
  console.log(
    row(
      'SIGCONT → back in discovery',
      stop.map((s) => s.backMs),
    ),
  );
  console.log(
    row(
      'SIGKILL → absent from discovery',
      kill.map((s) => s.absentMs),
      '≤ 2 000',
    ),
  );
  console.log(
    row(
      'SIGKILL → a new process back in discovery',
      kill.map((s) => s.backMs),
    ),
  );

  const costs: CostRow[] = [];
  for (const n of PROBE_SIZES) costs.push(await probingCost(n));
  if (costs.length === 0) {
    console.log(JSON.stringify({ bench: 'eviction', stop, kill, costs }));
    return;
  }
  console.log('');
  console.log(`Probing cost, one worker, --probe-interval 5s, ${WINDOW_S} s window`);
  console.log('| Ready proxies | probes/s | failed | worker CPU per probe, ms | Redis commands per probe | of which claims | probe latency p50 / p99, ms |');
  console.log('|---|---|---|---|---|---|---|');
  for (const c of costs) {
    console.log(
      `| ${c.proxies} | ${fmt(c.probesPerSecond, 1)} | ${c.failed} | ${fmt(c.cpuMsPerProbe, 3)} | ${fmt(c.redisCommandsPerProbe, 2)} | ${fmt(c.claimsPerProbe, 2)} | ${fmt(c.latencyP50Ms, 1)} / ${fmt(c.latencyP99Ms, 1)} |`,
    );
  }
  console.log(JSON.stringify({ bench: 'eviction', stop, kill, costs }));
}
