/**
 * Reconcile throughput against the fake kube-apiserver, with one and with two `egress worker`
 * processes, beside raw BullMQ (a no-op processor) on the same Redis in the same run.
 *
 *   npm run bench -- reconcile          (BENCH_PROXIES, default 300)
 *
 * N proxies are applied in one request to an `egress api` process, then the workers start; each first reconcile reads
 * the proxy, creates its Pod through @kubernetes/client-node in the fake, writes Provisioning and
 * parks the job as delayed (the Pod never runs here). Timed from the workers' start until all N
 * Pods exist and every proxy is Provisioning: reconciles per second (worker start-up included).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { freePort, startRedisChild } from '../src/redis/redis-server.ts';
import { startFakeKubeApiserver } from '../test/fakes/kube-apiserver/index.ts';
import { rawBullmq } from './pipeline.bench.ts';
import { fmt } from './stats.ts';

const N = Number(process.env.BENCH_PROXIES ?? 300);

function start(args: string[], env: Record<string, string>, readyText: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['bin/egress.js', ...args], {
    env: { ...process.env, ...env, EGRESS_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const lines = createInterface({ input: child.stderr as NodeJS.ReadableStream });
  return new Promise((resolve, reject) => {
    lines.on('line', (l) => l.includes(readyText) && resolve(child));
    child.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code}`)));
  });
}

async function stop(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (c) => {
      if (c.exitCode !== null) return;
      c.kill('SIGTERM');
      await once(c, 'exit');
    }),
  );
}

async function round(workers: number, redisUrl: string, dir: string): Promise<number> {
  const kube = await startFakeKubeApiserver({ tokens: { t: 'bench' } });
  kube.store.namespaces.add('proxies');
  await writeFile(join(dir, 'token'), 't\n');
  const file = join(dir, `egress-${workers}.yaml`);
  await writeFile(
    file,
    `providers:\n  - { name: k8s, type: kubernetes, server: "${kube.url}", tokenFile: ${join(dir, 'token')}, skipTLSVerify: true, namespace: proxies, proxies: { port: 3128 } }\n`,
  );
  const prefix = `{bench-reconcile-${workers}}`;
  const port = await freePort();
  const env = { REDIS_URL: redisUrl };
  const common = ['--config', file, '--prefix', prefix, '--log-level', 'info'];
  const children: ChildProcess[] = [];
  try {
    // Tokenless on loopback (--no-auth): the bench times reconciles, not authentication.
    children.push(await start(['api', ...common, '--port', String(port), '--no-auth', '--data-dir', join(dir, 'api-data')], env, 'api listening'));
    // The proxies are applied before any worker runs, so the timing is the reconciles alone.
    const yaml = Array.from({ length: N }, (_, i) => `metadata: { name: p${i} }\nspec: { provider: k8s }\n`).join('---\n');
    const res = await fetch(`http://127.0.0.1:${port}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: yaml });
    if (!res.ok) throw new Error(`apply: ${res.status}`);
    const started = await Promise.all(
      Array.from({ length: workers }, () => start(['worker', ...common, '--queues', 'reconcile', '--concurrency', '10'], env, 'worker started')),
    );
    children.push(...started);
    const t0 = performance.now();
    for (;;) {
      const { items } = (await (await fetch(`http://127.0.0.1:${port}/v1/proxies`)).json()) as { items: { status: { phase: string } }[] };
      if (kube.listPods('proxies').length === N && items.every((p) => p.status.phase === 'Provisioning')) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    return N / ((performance.now() - t0) / 1000);
  } finally {
    await stop(children);
    await kube.close();
  }
}

export async function runReconcileBench(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-bench-reconcile-'));
  const redis = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
  try {
    const raw = await rawBullmq(redis.url);
    const one = await round(1, redis.url, dir);
    const two = await round(2, redis.url, dir);
    console.log(
      `reconcile throughput — ${N} proxies on the fake kube-apiserver, worker concurrency 10, first reconcile each (Pod created, Provisioning written)`,
    );
    console.log('| | reconciles/s | vs raw BullMQ |');
    console.log('|---|---|---|');
    console.log(`| raw BullMQ, no-op processor (same Redis, same run) | ${fmt(raw.jobsPerSecond, 0)} | 1.00 |`);
    console.log(`| 1 worker process | ${fmt(one, 0)} | ${fmt(one / raw.jobsPerSecond, 2)} |`);
    console.log(`| 2 worker processes | ${fmt(two, 0)} | ${fmt(two / raw.jobsPerSecond, 2)} |`);
    console.log(JSON.stringify({ bench: 'reconcile', proxies: N, rawJobsPerSecond: raw.jobsPerSecond, oneWorker: one, twoWorkers: two }));
  } finally {
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runReconcileBench();
