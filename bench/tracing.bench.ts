/**
 * What tracing costs the check pipeline, paired: the one-process pipeline (worker and publisher
 * roles, no-op checker) with tracing off and on, alternated in one run — off, on, on, off, off,
 * on, … — on one private redis-server, so that every ratio compares runs that saw the same
 * machine. Tracing on exports every span (the default sampler, `parentbased_always_on`) over OTLP
 * http/protobuf to a local endpoint that only counts bytes.
 *
 *   npm run bench -- tracing     (BENCH_PAIRS rounds, default 4; BENCH_JOBS, BENCH_SAMPLES as in the pipeline bench)
 *
 * BENCH_TRACING_PARTS=1 adds two runs to every round, to show what tracing's cost is made of:
 * - `context`: tracing off, with only OpenTelemetry's context manager installed (Node 20's
 *   AsyncLocalStorage, whose promise hook runs for every promise the process makes): the floor of
 *   any tracing that keeps the active span across `await`s;
 * - `unsampled`: tracing on with the sampler `always_off`: the SDK, BullMQ's trace-context
 *   propagation and the context manager, and no span recorded or exported.
 * The rounds' orders rotate, and each ratio is taken against its own round's `off` run.
 *
 * Besides jobs/s, each run reports this process's CPU time per check (`process.cpuUsage`: the
 * roles, the bench's producer, the OTLP endpoint; not redis-server), which moves less with the
 * machine's load than throughput does. BENCH_CPU_PROFILE=<dir> writes a V8 CPU profile of every
 * run there (`off-1.cpuprofile`, `on-1.cpuprofile`, …) to see where a traced check's CPU goes.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { startRedisChild } from '../src/redis/redis-server.ts';
import { pipeline, rawBullmq } from './pipeline.bench.ts';
import { fmt, median } from './stats.ts';
import { startOtlpSink } from './support/otlp-sink.ts';

const PAIRS = Number(process.env.BENCH_PAIRS ?? 4);
const N = Number(process.env.BENCH_JOBS ?? 20000);
const PROFILE_DIR = process.env.BENCH_CPU_PROFILE;
const PARTS = process.env.BENCH_TRACING_PARTS === '1';

type Variant = 'off' | 'on' | 'context' | 'unsampled';

interface Run {
  variant: Variant;
  jobsPerSecond: number;
  cpuMicrosPerCheck: number;
  /** redis-server's CPU per check (Linux /proc; NaN elsewhere). */
  redisCpuMicrosPerCheck: number;
  p50: number;
  p99: number;
}

async function profiled<T>(name: string, work: () => Promise<T>): Promise<T> {
  if (!PROFILE_DIR) return work();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  try {
    return await work();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    await mkdir(PROFILE_DIR, { recursive: true });
    await writeFile(join(PROFILE_DIR, `${name}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
}

/** CPU time of process `pid` so far, in µs (utime + stime of /proc/<pid>/stat, at 100 ticks a second); NaN where there is no /proc. */
async function cpuMicrosOf(pid: number): Promise<number> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return Number.NaN;
  }
}

/** Where the runs go: the private redis-server, its data directory, the OTLP endpoint. */
interface Bench {
  redisUrl: string;
  redisPid: number;
  dir: string;
  sinkUrl: string;
}

/** The pipeline as `variant` has it (its OTEL_* environment, and the context manager alone for `context`). */
async function runVariant(b: Bench, variant: Variant, n: number): Promise<{ jobsPerSecond: number; latency: { p50: number; p99: number; n: number } }> {
  switch (variant) {
    case 'off':
      return pipeline(b.redisUrl, b.dir, false, undefined, n);
    case 'on':
      return pipeline(b.redisUrl, b.dir, false, { OTEL_EXPORTER_OTLP_ENDPOINT: b.sinkUrl }, n);
    case 'unsampled':
      return pipeline(b.redisUrl, b.dir, false, { OTEL_EXPORTER_OTLP_ENDPOINT: b.sinkUrl, OTEL_TRACES_SAMPLER: 'always_off' }, n);
    case 'context': {
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      try {
        // Inside a context, as a traced process always is: AsyncLocalStorage's hooks start with its first run.
        return await context.with(context.active(), () => pipeline(b.redisUrl, b.dir, false, undefined, n));
      } finally {
        context.disable();
      }
    }
  }
}

async function once(b: Bench, variant: Variant, name: string): Promise<Run> {
  globalThis.gc?.();
  const cpu = process.cpuUsage();
  const redisCpu = await cpuMicrosOf(b.redisPid);
  const r = await profiled(name, () => runVariant(b, variant, N));
  const used = process.cpuUsage(cpu);
  // Throughput phase and latency samples both run checks: CPU per check over all of them.
  const checks = N + r.latency.n;
  return {
    variant,
    jobsPerSecond: r.jobsPerSecond,
    cpuMicrosPerCheck: (used.user + used.system) / checks,
    redisCpuMicrosPerCheck: ((await cpuMicrosOf(b.redisPid)) - redisCpu) / checks,
    p50: r.latency.p50,
    p99: r.latency.p99,
  };
}

/** Round `i`'s order: off and on ABBA (a drift during a pair falls on both sides alike over two pairs); with the parts, every variant rotated. */
function orderOf(i: number): Variant[] {
  if (!PARTS) return i % 2 === 0 ? ['on', 'off'] : ['off', 'on'];
  const all: Variant[] = ['off', 'on', 'context', 'unsampled'];
  const k = (i - 1) % all.length;
  return [...all.slice(k), ...all.slice(0, k)];
}

export async function runTracingBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-'));
  const redis = await startRedisChild({ dir, appendOnly: false });
  const sink = await startOtlpSink();
  const b: Bench = { redisUrl: redis.url, redisPid: redis.pid, dir, sinkUrl: sink.url };
  const load = [loadavg()[0] ?? 0];
  try {
    // Warm BullMQ's and the pipeline's code paths (traced and not) before anything is measured.
    await rawBullmq(redis.url, 2000, '{bench-warmup}');
    const warm = Math.min(N, 2000);
    await runVariant(b, 'off', warm);
    await runVariant(b, 'on', warm);
    const rounds: Partial<Record<Variant, Run>>[] = [];
    for (let i = 1; i <= PAIRS; i++) {
      const round: Partial<Record<Variant, Run>> = {};
      for (const variant of orderOf(i)) round[variant] = await once(b, variant, `${variant}-${i}`);
      rounds.push(round);
      load.push(loadavg()[0] ?? 0);
    }
    const variants: Variant[] = PARTS ? ['on', 'unsampled', 'context'] : ['on'];
    const ratio = (round: Partial<Record<Variant, Run>>, v: Variant): number => (round[v]?.jobsPerSecond ?? NaN) / (round.off?.jobsPerSecond ?? NaN);
    const cpuRatio = (round: Partial<Record<Variant, Run>>, v: Variant): number => (round[v]?.cpuMicrosPerCheck ?? NaN) / (round.off?.cpuMicrosPerCheck ?? NaN);
    console.log(
      `check pipeline, tracing on vs off — ${N} jobs a run, ${PAIRS} rounds (${PARTS ? 'off, on, context, unsampled rotated' : 'off and on alternated, ABBA'}), load average ${load.map((l) => fmt(l, 1)).join(' → ')}`,
    );
    console.log(
      `| round | off jobs/s | ${variants.map((v) => `${v} jobs/s (ratio)`).join(' | ')} | CPU µs/check off / ${variants.join(' / ')} | redis-server CPU µs/check off / on | add→start p50 / p99 ms, off / on |`,
    );
    console.log(`|---|---|${variants.map(() => '---|').join('')}---|---|---|`);
    rounds.forEach((round, i) => {
      const off = round.off as Run;
      const on = round.on as Run;
      console.log(
        `| ${i + 1} | ${fmt(off.jobsPerSecond, 0)} | ${variants.map((v) => `${fmt(round[v]?.jobsPerSecond ?? NaN, 0)} (**${fmt(ratio(round, v))}**)`).join(' | ')} | ${[off, ...variants.map((v) => round[v])].map((r) => fmt(r?.cpuMicrosPerCheck ?? NaN, 0)).join(' / ')} | ${fmt(off.redisCpuMicrosPerCheck, 0)} / ${fmt(on.redisCpuMicrosPerCheck, 0)} | ${fmt(off.p50)} / ${fmt(off.p99)}, ${fmt(on.p50)} / ${fmt(on.p99)} |`,
      );
    });
    const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
    for (const v of variants) {
      const ratios = rounds.map((r) => ratio(r, v)).sort((a, b) => a - b);
      const all = sum(rounds.map((r) => r[v]?.jobsPerSecond ?? NaN)) / sum(rounds.map((r) => r.off?.jobsPerSecond ?? NaN));
      console.log(
        `ratio ${v}/off: ${fmt(ratios[0] ?? NaN)}–${fmt(ratios[ratios.length - 1] ?? NaN)}, median ${fmt(median(ratios))}, all runs together ${fmt(all)}${v === 'on' ? ' (target ≥ 0.90)' : ''}; CPU per check ${v}/off, median ${fmt(median(rounds.map((r) => cpuRatio(r, v))))}`,
      );
    }
    console.log(`${sink.stats.requests} exports, ${fmt(sink.stats.bytes / 1e6, 1)} MB`);
    console.log(JSON.stringify({ bench: 'tracing', n: N, rounds: PAIRS, parts: PARTS, load, runs: rounds, otlp: sink.stats }));
  } finally {
    await sink.close();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runTracingBench();
