import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Queue, QueueEvents } from 'bullmq';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import { freePort } from '../../src/redis/redis-server.ts';
import { ROOT, runCli, spawnEgress, type EgressProcess } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';
import { tempDir } from '../support/temp-dirs.ts';

const HANGING_WORKER = resolve(ROOT, 'test/support/hanging-worker.ts');

async function configFile(providers: string[]): Promise<string> {
  const dir = await tempDir('egress-e2e-');
  const file = join(dir, 'egress.yaml');
  await writeFile(file, `providers:\n${providers.map((p) => `  - { name: ${p}, type: local }\n`).join('')}`);
  return file;
}

describe('the roles as separate processes', () => {
  const procs: EgressProcess[] = [];
  let api: string;
  let common: string[];
  let dataDir: string;
  const env = { REDIS_URL: inject('redisUrl') };

  function start(args: string[], script?: string, extraEnv: Record<string, string> = {}): EgressProcess {
    const p = spawnEgress(args, { ...env, ...extraEnv }, script);
    procs.push(p);
    return p;
  }

  beforeAll(async () => {
    const file = await configFile(['local', 'slow']);
    dataDir = await tempDir('egress-e2e-data-');
    common = ['--config', file, '--prefix', uniquePrefix(), '--data-dir', dataDir];
    const port = await freePort();
    api = `http://127.0.0.1:${port}`;
    const roles = [
      start(['scheduler', ...common, '--provider-check-interval', '10s']),
      start(['publisher', ...common]),
      start(['api', ...common, '--port', String(port)]),
    ];
    await Promise.all([roles[0]?.waitForLog('scheduler synced'), roles[1]?.waitForLog('publisher started'), roles[2]?.waitForLog('api listening')]);
  });

  afterAll(async () => {
    const codes = await Promise.all(procs.map((p) => p.stop()));
    // Every role shut down cleanly on SIGTERM (the SIGKILLed one excepted).
    expect(codes.filter((c) => c !== 0 && c !== null)).toEqual([]);
  });

  test('ProviderHealth appears Ready and an ad-hoc check runs through the CLI', async () => {
    // BullMQ runs the stalled-job check once per interval across all workers (a key in Redis
    // with that expiry), so every worker of the queue gets the same short interval.
    const metricsPort = await freePort();
    const worker = start(['worker', ...common, '--lock-duration', '1s', '--stalled-interval', '500ms', '--metrics-port', String(metricsPort)]);
    await worker.waitForLog('worker started');
    const ph = await waitFor('local to be Ready', async () => {
      const run = await runCli(['get', 'ph', 'local', '-o', 'json', '--api-url', api, '--data-dir', dataDir]);
      const parsed = run.code === 0 ? (JSON.parse(run.out) as ProviderHealth) : undefined;
      return parsed?.status.ready ? parsed : undefined;
    });
    expect(ph.status.targets[0]).toMatchObject({ name: 'localhost', reason: 'Ok' });
    const check = await runCli(['check', 'local', '--wait', '--data-dir', dataDir]);
    expect(check, check.err).toMatchObject({ code: 0 });
    expect(check.out).toMatch(/\nlocalhost\s+true\s+Ok\s/);
    // The worker's own job metrics are scraped from its own port.
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/proxy_operator_jobs_total\{queue="checks",outcome="completed"\} [1-9]/);
    // Stopped with SIGTERM, the worker shuts down cleanly (it must not hold the next test's jobs).
    expect(await worker.stop()).toBe(0);
  });

  test('a worker killed with SIGKILL mid-job: another worker finishes the job', async () => {
    const events = new QueueEvents(QUEUES.checks, { connection: redisOptions(env.REDIS_URL, 'worker'), prefix: common[3] });
    const checks = new Queue(QUEUES.checks, { connection: redisOptions(env.REDIS_URL, 'producer'), prefix: common[3] });
    try {
      await events.waitUntilReady();
      // The first worker hangs in every check of `slow`, with a short lock so its death is noticed soon.
      const doomed = start([...common, '--lock-duration', '1s', '--stalled-interval', '500ms'], HANGING_WORKER, { HANG_PROVIDERS: 'slow' });
      await doomed.waitForLog('worker started');
      // The doomed worker must hold this very job when it dies: the scheduler's own checks of `slow` hang in it too,
      // so a CHECK_STARTED line alone may be another job's (this job then waits, and the rescuer takes it fresh).
      const active = new Set<string>();
      let sawActive = (): void => undefined;
      events.on('active', (args) => {
        active.add(args.jobId);
        sawActive();
      });
      const enqueue = await runCli(['check', 'slow', '--data-dir', dataDir, '-o', 'json']);
      const { jobId } = JSON.parse(enqueue.out) as { jobId: string };
      await new Promise<void>((resolveActive) => {
        sawActive = () => active.has(jobId) && resolveActive();
        sawActive();
      });
      doomed.child.kill('SIGKILL');
      expect(await doomed.exited).toBe(null);

      const completed = new Promise<{ jobId: string; returnvalue: unknown }>((resolveDone) => {
        events.on('completed', (args) => {
          if (args.jobId === jobId) resolveDone(args);
        });
      });
      const rescuer = start(['worker', ...common, '--lock-duration', '1s', '--stalled-interval', '500ms']);
      const done = await completed;
      const result = (typeof done.returnvalue === 'string' ? JSON.parse(done.returnvalue) : done.returnvalue) as { targets: { reason: string }[] };
      expect(result.targets[0]?.reason).toBe('Ok');
      expect(rescuer.logs()).toContain(`"jobId":"${jobId}"`);
      const job = await checks.getJob(jobId);
      expect(job?.stalledCounter).toBe(1);
    } finally {
      await events.close();
      await checks.close();
    }
  });
});

describe('bounded shutdown', () => {
  test('SIGTERM with a check that never returns: the worker aborts it after the grace period, exits 0, and the job is kept for a retry', async () => {
    const file = await configFile(['slow']);
    const prefix = uniquePrefix();
    const env = { REDIS_URL: inject('redisUrl') };
    const checks = new Queue(QUEUES.checks, { connection: redisOptions(env.REDIS_URL, 'producer'), prefix });
    const worker = spawnEgress(
      ['--config', file, '--prefix', prefix, '--shutdown-grace', '300ms', '--provider-check-timeout', '0'],
      { ...env, HANG_PROVIDERS: 'slow' },
      HANGING_WORKER,
    );
    try {
      await worker.waitForLog('worker started');
      const job = await checks.add('check', { provider: 'slow', trigger: 'adhoc' }, { attempts: 3, backoff: { type: 'fixed', delay: 60_000 } });
      await worker.waitForLog('CHECK_STARTED slow');
      expect(await worker.stop()).toBe(0);
      expect(worker.logs()).toContain('jobs still running after the grace period: aborting them');
      // Not lost: the interrupted attempt failed as retryable and waits for its next try.
      const state = await checks.getJobState(job.id ?? '');
      expect(state).toBe('delayed');
      const again = await checks.getJob(job.id ?? '');
      expect(again?.attemptsMade).toBe(1);
      expect(again?.failedReason).toBe('the check job was cancelled before it finished');
    } finally {
      await worker.stop();
      await checks.obliterate({ force: true });
      await checks.close();
    }
  });
});
