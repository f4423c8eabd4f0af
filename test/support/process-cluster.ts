import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue, type Job } from 'bullmq';
import { expect, inject } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { freePort } from '../../src/redis/redis-server.ts';
import { spawnEgress, type EgressProcess } from './cli.ts';
import { uniquePrefix } from './config.ts';
import { waitFor } from './wait.ts';

/**
 * `egress api` as a process of its own on the run's Redis under a fresh prefix, for tests whose
 * workers are processes too (crash safety): each test starts its workers with `start`.
 */
export interface ProcessCluster {
  /** Workers started by the current test (`start`), in order. */
  workers: EgressProcess[];
  /** `--config … --prefix … --data-dir …`, for every process of the cluster. */
  common: string[];
  prefix: string;
  dataDir: string;
  api: string;
  echo: string;
  /** The cluster's `reconcile` queue, to watch its jobs. */
  reconcile: Queue;
  /** Starts an `egress` process (or `script`, a harness taking the same arguments) and counts it among the workers. */
  start(args: string[], script?: string, env?: Record<string, string>): EgressProcess;
  apply(yaml: string): Promise<void>;
  proxy(name: string): Promise<ProxyView | undefined>;
  close(): Promise<void>;
}

export async function startProcessCluster(configYaml: string): Promise<ProcessCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-cluster-'));
  const file = join(dir, 'egress.yaml');
  await writeFile(file, configYaml);
  const dataDir = await mkdtemp(join(tmpdir(), 'egress-cluster-data-'));
  const prefix = uniquePrefix();
  const common = ['--config', file, '--prefix', prefix, '--data-dir', dataDir];
  const env = { REDIS_URL: inject('redisUrl') };
  const procs: EgressProcess[] = [];
  const workers: EgressProcess[] = [];
  const spawnOne = (args: string[], script?: string, extra: Record<string, string> = {}): EgressProcess => {
    const p = spawnEgress(args, { ...env, ...extra }, script);
    procs.push(p);
    return p;
  };
  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  // Tokenless (--no-auth, loopback): these clusters are about crashes, not authentication.
  await spawnOne(['api', ...common, '--port', String(port), '--no-auth']).waitForLog('api listening');
  const reconcile = new Queue(QUEUES.reconcile, { connection: redisOptions(env.REDIS_URL, 'producer'), prefix });
  return {
    workers,
    common,
    prefix,
    dataDir,
    api,
    echo: `${api}/v1/echo`,
    reconcile,
    start(args, script, extra) {
      const p = spawnOne(args, script, extra);
      workers.push(p);
      return p;
    },
    async apply(yaml) {
      const res = await fetch(`${api}/v1/proxies`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: yaml });
      expect(res.status, await res.clone().text()).toBe(200);
    },
    async proxy(name) {
      const res = await fetch(`${api}/v1/proxies/${name}`);
      return res.status === 200 ? ((await res.json()) as ProxyView) : undefined;
    },
    async close() {
      await reconcile.close();
      await Promise.all(procs.map((p) => p.stop()));
      await rm(dir, { recursive: true, force: true });
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Runs `check`; on failure, adds the tail of the workers' logs to the error. */
export async function withLogs<T>(workers: EgressProcess[], check: () => Promise<T>): Promise<T> {
  try {
    return await check();
  } catch (err) {
    const logs = workers.map((w, i) => `--- worker ${i} ---\n${w.logs().slice(-4000)}`).join('\n');
    throw new Error(`${(err as Error).message}\n${logs}`, { cause: err });
  }
}

/** The one active reconcile job of `proxy` (held by the worker about to die). */
export function activeJobOf(reconcile: Queue, proxy: string): Promise<Job> {
  return waitFor(`the active reconcile job of ${proxy}`, async () => {
    const jobs = await reconcile.getJobs(['active']);
    return jobs.find((j) => (j.data as { proxy?: string }).proxy === proxy);
  });
}
