/**
 * What tracing costs the check pipeline, paired: the one-process pipeline (worker and publisher
 * roles, no-op checker) with tracing off and on, alternated in one run — off, on, on, off, off,
 * on, … — on one private redis-server, so that every ratio compares runs that saw the same
 * machine. Tracing on exports every span (the default sampler, `parentbased_always_on`) over OTLP
 * http/protobuf to a local endpoint that only counts bytes.
 *
 *   npm run bench -- tracing     (BENCH_PAIRS pairs, default 4; BENCH_JOBS, BENCH_SAMPLES as in the pipeline bench)
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
import { startRedisChild } from '../src/redis/redis-server.ts';
import { pipeline, rawBullmq } from './pipeline.bench.ts';
import { fmt } from './stats.ts';
import { startOtlpSink, type OtlpSink } from './support/otlp-sink.ts';

const PAIRS = Number(process.env.BENCH_PAIRS ?? 4);
const N = Number(process.env.BENCH_JOBS ?? 20000);
const PROFILE_DIR = process.env.BENCH_CPU_PROFILE;

interface Run {
  tracing: boolean;
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

async function once(redis: { url: string; pid: number }, dir: string, sink: OtlpSink | undefined, name: string): Promise<Run> {
  globalThis.gc?.();
  const cpu = process.cpuUsage();
  const redisCpu = await cpuMicrosOf(redis.pid);
  const r = await profiled(name, () => pipeline(redis.url, dir, false, sink?.url, N));
  const used = process.cpuUsage(cpu);
  // Throughput phase and latency samples both run checks: CPU per check over all of them.
  const checks = N + r.latency.n;
  return {
    tracing: sink !== undefined,
    jobsPerSecond: r.jobsPerSecond,
    cpuMicrosPerCheck: (used.user + used.system) / checks,
    redisCpuMicrosPerCheck: ((await cpuMicrosOf(redis.pid)) - redisCpu) / checks,
    p50: r.latency.p50,
    p99: r.latency.p99,
  };
}

export async function runTracingBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-'));
  const redis = await startRedisChild({ dir, appendOnly: false });
  const sink = await startOtlpSink();
  const load = [loadavg()[0] ?? 0];
  try {
    // Warm BullMQ's and the pipeline's code paths (traced and not) before anything is measured.
    await rawBullmq(redis.url, 2000, '{bench-warmup}');
    const warm = Math.min(N, 2000);
    await pipeline(redis.url, dir, false, undefined, warm);
    await pipeline(redis.url, dir, false, sink.url, warm);
    const runs: Run[] = [];
    const pairs: { off: Run; on: Run }[] = [];
    for (let i = 1; i <= PAIRS; i++) {
      // ABBA order: a drift in the machine's load during a pair falls on both sides alike over two pairs.
      const onFirst = i % 2 === 0;
      const first = await once(redis, dir, onFirst ? sink : undefined, `${onFirst ? 'on' : 'off'}-${i}`);
      const second = await once(redis, dir, onFirst ? undefined : sink, `${onFirst ? 'off' : 'on'}-${i}`);
      runs.push(first, second);
      pairs.push(onFirst ? { off: second, on: first } : { off: first, on: second });
      load.push(loadavg()[0] ?? 0);
    }
    console.log(
      `check pipeline, tracing on vs off — ${N} jobs a run, ${PAIRS} pairs alternated (ABBA), load average ${load.map((l) => fmt(l, 1)).join(' → ')}`,
    );
    console.log('| pair | off jobs/s | on jobs/s | ratio on/off | CPU µs/check off / on (redis-server off / on) | add→start p50 / p99 ms, off / on |');
    console.log('|---|---|---|---|---|---|');
    pairs.forEach(({ off, on }, i) =>
      console.log(
        `| ${i + 1} | ${fmt(off.jobsPerSecond, 0)} | ${fmt(on.jobsPerSecond, 0)} | **${fmt(on.jobsPerSecond / off.jobsPerSecond)}** | ${fmt(off.cpuMicrosPerCheck, 0)} / ${fmt(on.cpuMicrosPerCheck, 0)} (${fmt(off.redisCpuMicrosPerCheck, 0)} / ${fmt(on.redisCpuMicrosPerCheck, 0)}) | ${fmt(off.p50)} / ${fmt(off.p99)}, ${fmt(on.p50)} / ${fmt(on.p99)} |`,
      ),
    );
    const ratios = pairs.map((p) => p.on.jobsPerSecond / p.off.jobsPerSecond).sort((a, b) => a - b);
    const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
    const cpuRatio = sum(pairs.map((p) => p.on.cpuMicrosPerCheck)) / sum(pairs.map((p) => p.off.cpuMicrosPerCheck));
    console.log(
      `ratio on/off: ${fmt(ratios[0] ?? NaN)}–${fmt(ratios[ratios.length - 1] ?? NaN)}, all runs together ${fmt(sum(pairs.map((p) => p.on.jobsPerSecond)) / sum(pairs.map((p) => p.off.jobsPerSecond)))} (target ≥ 0.90); CPU per check on/off ${fmt(cpuRatio)}; ${sink.stats.requests} exports, ${fmt(sink.stats.bytes / 1e6, 1)} MB`,
    );
    console.log(JSON.stringify({ bench: 'tracing', n: N, pairs: PAIRS, load, runs, otlp: sink.stats }));
  } finally {
    await sink.close();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runTracingBench();
