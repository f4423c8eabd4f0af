/**
 * The check pipeline against raw BullMQ, on one private redis-server, in one run.
 *
 *   npm run bench -- pipeline            (or: node --import tsx bench/pipeline.bench.ts)
 *   BENCH_JOBS=20000 BENCH_ROUNDS=3 BENCH_CONCURRENCY=10 BENCH_SAMPLES=300 (the defaults)
 *
 * - throughput: N check jobs added in bulk, timed until N results are published to the status
 *   store (checks worker → results queue → publisher), beside N no-op jobs through a plain
 *   BullMQ Worker with the same concurrency;
 * - add-to-start latency: one job at a time into an idle worker, from `add` to the processor
 *   starting (for the pipeline: to the checker being called);
 * - the one-process pipeline again with tracing on, exporting its spans (OTLP http/protobuf, the SDK's default batching) to a
 *   local endpoint that only counts the bytes, beside the same pipeline with tracing off.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue, Worker } from 'bullmq';
import { redisOptions } from '../queues/connection.ts';
import { QUEUES } from '../queues/names.ts';
import { runRoles } from '../src/cli/run-roles.ts';
import type { AppConfig } from '../src/config/app.ts';
import { silentLogger } from '../src/logging.ts';
import type { Provider } from '../src/providers/types.ts';
import { startRedisChild } from '../src/redis/redis-server.ts';
import { alternating, fmt, median, summarize } from './stats.ts';
import { benchConfig } from './support/app-config.ts';
import { startOtlpSink } from './support/otlp-sink.ts';
import { freezeConfig } from '../src/config/app.ts';
import { telemetryFromEnv, type OtelEnv } from '../src/telemetry/config.ts';

const N = Number(process.env.BENCH_JOBS ?? 20000);
const LATENCY_SAMPLES = Number(process.env.BENCH_SAMPLES ?? 300);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 10);
/** Rounds of every row, in alternating order; the ratios are the median of the rounds' (BENCH_ROUNDS). */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

function config(redisUrl: string, prefix: string, dataDir: string): AppConfig {
  return benchConfig(redisUrl, prefix, dataDir, {
    providers: [{ name: 'noop', type: 'local' }],
    worker: { queues: ['checks'], concurrency: CONCURRENCY, lockDurationMs: 30_000, stalledIntervalMs: 30_000 },
  });
}

export async function rawBullmq(
  redisUrl: string,
  n = N,
  prefix = '{bench-raw}',
): Promise<{ jobsPerSecond: number; latency: { p50: number; p99: number; n: number } }> {
  const queue = new Queue('raw', { connection: redisOptions(redisUrl, 'producer'), prefix, defaultJobOptions: { removeOnComplete: { count: 1000 } } });
  let done = 0;
  let onDone: (() => void) | undefined;
  let started: ((t: number) => void) | undefined;
  const worker = new Worker(
    'raw',
    async () => {
      started?.(performance.now());
      if (++done === n) onDone?.();
    },
    { connection: redisOptions(redisUrl, 'worker'), prefix, concurrency: CONCURRENCY },
  );
  await worker.waitUntilReady();
  const all = new Promise<void>((resolve) => (onDone = resolve));
  const t0 = performance.now();
  for (let i = 0; i < n; i += 500) await queue.addBulk(Array.from({ length: Math.min(500, n - i) }, () => ({ name: 'noop', data: {} })));
  await all;
  const jobsPerSecond = n / ((performance.now() - t0) / 1000);
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const start = new Promise<number>((resolve) => (started = resolve));
    const t = performance.now();
    await queue.add('noop', {});
    samples.push((await start) - t);
  }
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  return { jobsPerSecond, latency: summarize(samples) };
}

/**
 * The check pipeline in this process (worker and publisher roles), or with the publisher in a child
 * process; traced as `otel` (the OTEL_* environment) says when it is set.
 */
export async function pipeline(
  redisUrl: string,
  dataDir: string,
  publisherProcess: boolean,
  otel?: OtelEnv,
  n = N,
): Promise<{ jobsPerSecond: number; latency: { p50: number; p99: number; n: number } }> {
  const telemetry = otel ? telemetryFromEnv(otel) : undefined;
  const plain = config(redisUrl, publisherProcess ? '{bench-pipeline-2p}' : telemetry ? '{bench-pipeline-traced}' : '{bench-pipeline}', dataDir);
  const cfg = telemetry ? freezeConfig({ ...plain, telemetry }) : plain;
  let started: ((t: number) => void) | undefined;
  const noop: Provider = {
    name: 'noop',
    type: 'local',
    targets: () => ['localhost'],
    check: () => {
      started?.(performance.now());
      return Promise.resolve([{ target: 'localhost', ready: true, reason: 'Ok', message: 'ok', details: {}, durationSeconds: 0 }]);
    },
    close: () => Promise.resolve(),
  };
  const roles = await runRoles(cfg, publisherProcess ? ['worker'] : ['publisher', 'worker'], silentLogger(), { providerFactory: () => noop });
  // As deployed: `egress publisher` in a process of its own.
  let publisher: ChildProcess | undefined;
  if (publisherProcess) {
    const file = join(dataDir, 'bench.yaml');
    await writeFile(file, 'providers:\n  - { name: noop, type: local }\n');
    publisher = spawn(process.execPath, ['bin/egress.js', 'publisher', '--config', file, '--prefix', cfg.redis.prefix, '--log-level', 'info'], {
      env: { ...process.env, REDIS_URL: redisUrl },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    await new Promise<void>((resolve) => publisher?.stderr?.on('data', (d: Buffer) => d.toString().includes('publisher started') && resolve()));
  }
  const checks = new Queue(QUEUES.checks, {
    connection: redisOptions(redisUrl, 'producer'),
    prefix: cfg.redis.prefix,
    defaultJobOptions: { removeOnComplete: { count: 1000 } },
  });
  const results = new Queue(QUEUES.results, { connection: redisOptions(redisUrl, 'producer'), prefix: cfg.redis.prefix });
  const published = async (): Promise<number> => {
    const c = await results.getJobCounts('completed', 'waiting', 'active');
    return c.completed ?? 0;
  };
  const t0 = performance.now();
  for (let i = 0; i < n; i += 500) {
    await checks.addBulk(Array.from({ length: Math.min(500, n - i) }, () => ({ name: 'check', data: { provider: 'noop', trigger: 'adhoc' } })));
  }
  // Retention keeps at most 1000 completed results: count published ones through the store's
  // writes instead, by waiting for the results queue to drain after all checks completed.
  for (;;) {
    const c = await checks.getJobCounts('waiting', 'active', 'prioritized', 'delayed');
    const r = await results.getJobCounts('waiting', 'active', 'prioritized', 'delayed');
    const pending = Object.values(c).reduce((a, b) => a + b, 0) + Object.values(r).reduce((a, b) => a + b, 0);
    if (pending === 0 && (await published()) > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const jobsPerSecond = n / ((performance.now() - t0) / 1000);
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const start = new Promise<number>((resolve) => (started = resolve));
    const t = performance.now();
    await checks.add('check', { provider: 'noop', trigger: 'adhoc' });
    samples.push((await start) - t);
  }
  await roles.close();
  if (publisher) {
    publisher.kill('SIGTERM');
    await once(publisher, 'exit');
  }
  for (const q of [checks, results]) {
    await q.obliterate({ force: true });
    await q.close();
  }
  return { jobsPerSecond, latency: summarize(samples) };
}

type Row = Awaited<ReturnType<typeof rawBullmq>>;
type RowName = 'raw' | 'pipeline' | 'traced' | 'split';

/** The one row of `rows` whose throughput is the median of the rounds (its latency with it). */
function medianRow(rows: readonly Row[]): Row {
  const m = median(rows.map((r) => r.jobsPerSecond));
  return rows.reduce((best, r) => (Math.abs(r.jobsPerSecond - m) < Math.abs(best.jobsPerSecond - m) ? r : best));
}

export async function runPipelineBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-'));
  const redis = await startRedisChild({ dir, appendOnly: false });
  const sink = await startOtlpSink();
  try {
    // Warm BullMQ's code paths up first, so that raw BullMQ is not measured cold (the pipeline,
    // measured after it, would otherwise get the warm JIT for free).
    await rawBullmq(redis.url, 2000, '{bench-warmup}');
    const run: Record<RowName, () => Promise<Row>> = {
      raw: () => rawBullmq(redis.url),
      pipeline: () => pipeline(redis.url, dir, false),
      traced: () => pipeline(redis.url, dir, false, { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url }),
      split: () => pipeline(redis.url, dir, true),
    };
    // Rounds in alternating order (raw first, then last, …): a machine that drifts during the run
    // (another process, the host's clock) weighs on both sides of every ratio alike.
    const order: RowName[] = ['raw', 'pipeline', 'traced', 'split'];
    const rows: Record<RowName, Row[]> = { raw: [], pipeline: [], traced: [], split: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of alternating(order, round)) rows[name].push(await run[name]());
    }
    const perRound = (a: RowName, b: RowName): number[] => rows[a].map((r, i) => r.jobsPerSecond / (rows[b][i]?.jobsPerSecond ?? NaN));
    const ratios = { ratio: perRound('pipeline', 'raw'), splitRatio: perRound('split', 'raw'), tracedRatio: perRound('traced', 'pipeline') };
    const [raw, ours, traced, split] = [medianRow(rows.raw), medianRow(rows.pipeline), medianRow(rows.traced), medianRow(rows.split)];
    const list = (xs: number[]): string => xs.map((x) => fmt(x, 2)).join(', ');
    console.log(
      `check pipeline vs raw BullMQ — ${N} jobs, concurrency ${CONCURRENCY}, ${ROUNDS} rounds (the median round's row), ${LATENCY_SAMPLES} latency samples`,
    );
    console.log('| | jobs/s | add→start p50 (ms) | add→start p99 (ms) |');
    console.log('|---|---|---|---|');
    console.log(`| raw BullMQ, no-op processor | ${fmt(raw.jobsPerSecond, 0)} | ${fmt(raw.latency.p50)} | ${fmt(raw.latency.p99)} |`);
    console.log(
      `| check pipeline, no-op checker (check → result → published status) | ${fmt(ours.jobsPerSecond, 0)} | ${fmt(ours.latency.p50)} | ${fmt(ours.latency.p99)} |`,
    );
    console.log(
      `| check pipeline, tracing on (OTLP http/protobuf, default batch export) | ${fmt(traced.jobsPerSecond, 0)} | ${fmt(traced.latency.p50)} | ${fmt(traced.latency.p99)} |`,
    );
    console.log(
      `| check pipeline, publisher in its own process (as deployed) | ${fmt(split.jobsPerSecond, 0)} | ${fmt(split.latency.p50)} | ${fmt(split.latency.p99)} |`,
    );
    console.log(
      `ratio (pipeline / raw), median of the rounds: one process ${fmt(median(ratios.ratio), 2)} (${list(ratios.ratio)}), publisher apart ${fmt(median(ratios.splitRatio), 2)} (${list(ratios.splitRatio)}) (targets ≥ 0.50 / ≥ 0.45)`,
    );
    console.log(
      `ratio (tracing on / off, one process), median: ${fmt(median(ratios.tracedRatio), 2)} (${list(ratios.tracedRatio)}) — ${sink.stats.requests} exports, ${fmt(sink.stats.bytes / 1e6, 1)} MB`,
    );
    console.log(
      JSON.stringify({
        bench: 'pipeline',
        n: N,
        concurrency: CONCURRENCY,
        rounds: ROUNDS,
        raw,
        pipeline: ours,
        pipelineTraced: traced,
        pipelineSplit: split,
        ratio: median(ratios.ratio),
        splitRatio: median(ratios.splitRatio),
        tracedRatio: median(ratios.tracedRatio),
        perRound: ratios,
        otlp: sink.stats,
      }),
    );
  } finally {
    await sink.close();
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runPipelineBench();
