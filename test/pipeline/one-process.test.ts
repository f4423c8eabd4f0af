import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { AppConfig } from '../../src/config/app.ts';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import { silentLogger } from '../../src/logging.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';
import { factoryWithHanging } from '../support/providers.ts';
import { waitFor } from '../support/wait.ts';
import type { CheckResultData } from '../../src/health/check-result.ts';

describe('egress up in one process', () => {
  let config: AppConfig;
  let roles: RunningRoles;
  let api: string;
  const started: string[] = [];

  beforeAll(async () => {
    config = testConfig({
      providers: [
        { name: 'local', type: 'local' },
        { name: 'stuck', type: 'local' },
      ],
      intervalMs: 60_000,
      // Reached only by the hanging provider: a healthy check has seconds to spare.
      timeoutMs: 3000,
      concurrency: 1,
    });
    roles = await runRoles(config, ['publisher', 'worker', 'scheduler', 'api'], silentLogger(), {
      providerFactory: factoryWithHanging(['stuck'], (p) => started.push(p)),
    });
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    await roles.close();
  });

  async function getJson<T>(path: string, init?: RequestInit): Promise<{ status: number; body: T }> {
    const res = await fetch(api + path, init);
    return { status: res.status, body: (await res.json()) as T };
  }

  test('ProviderHealth for local appears Ready after the first round, and the gauges follow', async () => {
    const ph = await waitFor('local to be Ready', async () => {
      const { status, body } = await getJson<ProviderHealth>('/v1/providerhealths/local');
      return status === 200 && body.status.ready ? body : undefined;
    });
    expect(ph.status.targets).toEqual([
      expect.objectContaining({ name: 'localhost', ready: true, reason: 'Ok', details: expect.objectContaining({ dataDir: expect.any(String) }) }),
    ]);
    const metrics = await (await fetch(`${api}/metrics`)).text();
    expect(metrics).toContain('proxy_operator_provider_target_up{provider="local",target="localhost"} 1');
    expect(metrics).toMatch(/proxy_operator_provider_check_duration_seconds\{provider="local",target="localhost"\} \d/);
    expect(metrics).toMatch(/proxy_operator_provider_check_timestamp_seconds\{provider="local",target="localhost"\} \d{10}/);
    expect(metrics).toMatch(/bullmq_job_count\{queue="checks",state="completed"\} \d/);
    expect(metrics).toMatch(/proxy_operator_job_duration_seconds_count\{queue="checks",outcome="completed"\} [1-9]/);
  });

  test('a checker that hangs past the timeout reports Timeout, and the next job still runs', async () => {
    const stuck = await getJson<{ result: CheckResultData }>('/v1/providers/stuck/checks?wait=true', { method: 'POST' });
    expect(stuck.status).toBe(200);
    expect(stuck.body.result.targets).toEqual([expect.objectContaining({ target: 'localhost', ready: false, reason: 'Timeout' })]);
    expect(started).toContain('stuck');
    // The worker runs one job at a time: the next check only runs because the hung one was let go.
    const next = await getJson<{ result: CheckResultData }>('/v1/providers/local/checks?wait=true', { method: 'POST' });
    expect(next.body.result.targets[0]?.reason).toBe('Ok');
    const ph = await waitFor('stuck to be published', async () => (await getJson<ProviderHealth>('/v1/providerhealths/stuck')).body.status?.targets[0]);
    expect(ph.reason).toBe('Timeout');
    expect(ph.message).toMatch(/^no answer before the check deadline/);
  });

  test('an ad-hoc check through the CLI prints the result; unknown providers are 404', async () => {
    const run = await runCli(['check', 'local', '--wait', '--api-url', api, '-o', 'json']);
    expect(run.code).toBe(0);
    const reply = JSON.parse(run.out) as { result: CheckResultData };
    expect(reply.result.targets[0]).toMatchObject({ target: 'localhost', ready: true, reason: 'Ok' });

    const table = await runCli(['check', 'local', '--wait', '--api-url', api]);
    expect(table.out).toMatch(/^TARGET\s+READY\s+REASON\s+DURATION\s+MESSAGE\nlocalhost\s+true\s+Ok\s/);

    const notWaiting = await runCli(['check', 'local', '--api-url', api]);
    expect(notWaiting.out).toMatch(/^check of local enqueued as job \S+\n$/);

    const unknown = await getJson<{ message: string }>('/v1/providers/nope/checks', { method: 'POST' });
    expect(unknown).toEqual({ status: 404, body: { error: 'ERR_NOT_FOUND', message: 'provider "nope" not found' } });
    const cli = await runCli(['check', 'nope', '--api-url', api]);
    expect(cli.code).toBe(1);
    expect(cli.err).toBe('error: provider "nope" not found (ERR_NOT_FOUND)\n');
  });

  test('egress get ph shows tables, wide rows, json and yaml', async () => {
    await waitFor('both providers published', async () => (await getJson<{ items: ProviderHealth[] }>('/v1/providerhealths')).body.items.length === 2);
    const table = await runCli(['get', 'ph', '--api-url', api]);
    expect(table.code).toBe(0);
    expect(table.out.split('\n')[0]).toMatch(/^NAME\s+READY\s+TARGETS\s+LAST CHECK\s+SINCE\s+NOT READY$/);
    expect(table.out).toMatch(/\nlocal\s+true\s+1\/1\s/);
    expect(table.out).toMatch(/\nstuck\s+false\s+0\/1\s.*localhost:Timeout/);
    const wide = await runCli(['get', 'providerhealth', 'stuck', '-o', 'wide', '--api-url', api]);
    expect(wide.out).toMatch(/\nstuck\s+localhost\s+false\s+Timeout\s/);
    const json = JSON.parse((await runCli(['get', 'ph', 'local', '-o', 'json', '--api-url', api])).out) as ProviderHealth;
    expect(json.name).toBe('local');
    const yaml = await runCli(['get', 'ph', '-o', 'yaml', '--api-url', api]);
    expect(yaml.out).toMatch(/^items:\n {2}- name: local\n/);
    const missing = await runCli(['get', 'ph', 'nope', '--api-url', api]);
    expect(missing.code).toBe(1);
    const badFormat = await runCli(['get', 'ph', '-o', 'xml', '--api-url', api]);
    expect(badFormat).toMatchObject({ code: 2, err: 'error: -o/--output: expected one of json, yaml, wide, got "xml"\n' });
  });

  test('malformed requests get 400 with a message, never a stack trace', async () => {
    for (const path of ['/v1/jobs?state=exploded', '/v1/jobs?limit=-3']) {
      const res = await getJson<{ error: string; message: string }>(path);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('ERR_BAD_REQUEST');
      expect(res.body.message).toMatch(/^query parameter "(state|limit)" must be/);
      expect(JSON.stringify(res.body)).not.toContain('    at ');
    }
    const badWait = await getJson<{ message: string }>('/v1/providers/local/checks?wait=maybe', { method: 'POST' });
    expect(badWait).toEqual({ status: 400, body: { error: 'ERR_BAD_REQUEST', message: 'query parameter "wait" must be true or false, got "maybe"' } });
    expect((await getJson('/v2/nothing')).status).toBe(404);
  });

  test('failed jobs are listed and retried through the API and the CLI', async () => {
    // A check for a provider this worker does not know fails for good (as after a config rollout).
    const checks = new Queue(QUEUES.checks, { connection: redisOptions(config.redis.url ?? '', 'producer'), prefix: config.redis.prefix });
    try {
      const a = await checks.add('check', { provider: 'later', trigger: 'adhoc' }, { jobId: 'retry-me-a' });
      const b = await checks.add('check', { provider: 'later', trigger: 'adhoc' }, { jobId: 'retry-me-b' });
      await waitFor('both to fail', async () => (await a.getState()) === 'failed' && (await b.getState()) === 'failed');

      const listed = await runCli(['jobs', '--state', 'failed', '--api-url', api, '-o', 'json']);
      const failed = (JSON.parse(listed.out) as { items: { id: string; failedReason: string }[] }).items;
      expect(failed.map((j) => j.id).sort()).toEqual(['retry-me-a', 'retry-me-b']);
      expect(failed[0]?.failedReason).toBe('provider "later" is not configured in this worker');
      const table = await runCli(['jobs', '--state', 'failed', '--api-url', api]);
      expect(table.out).toMatch(/^QUEUE\s+ID\s+NAME\s+STATE\s+ATTEMPTS\s+AGE\s+REASON\nchecks\s+retry-me-/);

      const one = await fetch(`${api}/v1/jobs/retry-me-a/retry`, { method: 'POST' });
      expect(one.status).toBe(200);
      // Retried, it runs again (and fails again: the worker still does not know the provider).
      await waitFor('a to run again', async () => (await checks.getJob('retry-me-a'))?.attemptsMade === 2 && (await a.getState()) === 'failed');

      const done = await getJson<{ jobId: string }>('/v1/providers/local/checks?wait=true', { method: 'POST' });
      const notFailed = await getJson<{ message: string }>(`/v1/jobs/${done.body.jobId}/retry`, { method: 'POST' });
      expect(notFailed).toEqual({
        status: 409,
        body: { error: 'ERR_JOB_NOT_FAILED', message: `job "${done.body.jobId}" is completed; only failed jobs can be retried` },
      });

      const all = await runCli(['jobs', 'retry', '--all-failed', '--api-url', api]);
      expect(all.code).toBe(0);
      expect(all.out).toMatch(/^retried [2-9] failed job\(s\): checks [2-9]\n$/);
      await waitFor('b to fail again', async () => (await checks.getJob('retry-me-b'))?.attemptsMade === 2 && (await b.getState()) === 'failed');

      const cliOne = await runCli(['jobs', 'retry', 'retry-me-b', '--api-url', api]);
      expect(cliOne).toMatchObject({ code: 0, out: 'job checks/retry-me-b moved back to waiting\n' });
      await waitFor('b to run a third time', async () => (await checks.getJob('retry-me-b'))?.attemptsMade === 3);
      const missing = await runCli(['jobs', 'retry', 'no-such-job', '--api-url', api]);
      expect(missing).toMatchObject({ code: 1, err: 'error: job "no-such-job" not found (ERR_NOT_FOUND)\n' });
    } finally {
      await checks.close();
    }
  });
});
