/**
 * A long-running command whose role fails ends by itself: everything closed, exit 1, and the
 * cause on stderr as the CLI prints every error (`error: <message> (<code>)`).
 */
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, inject, test } from 'vitest';
import { SERVER_RECORD } from '../../src/redis/private-redis.ts';
import { freePort } from '../../src/redis/redis-server.ts';
import { ROOT, runCli, spawnEgress, type EgressProcess } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';

const FAILING_WORKER = resolve(ROOT, 'test/support/failing-worker.ts');

describe('a role that fails ends its command', () => {
  const procs: EgressProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.filter((p) => p.child.exitCode === null && p.child.signalCode === null).map((p) => p.stop()));
  });

  test('egress worker whose consumer stops running exits 1, printing the role and the cause', async () => {
    const dataDir = await tempDir('role-failure-worker-');
    const worker = spawnEgress(
      ['worker', '--prefix', uniquePrefix(), '--data-dir', dataDir, '--queues', 'checks', '--shutdown-grace', '1s'],
      { REDIS_URL: inject('redisUrl'), BREAK_CONSUMER: 'checks' },
      FAILING_WORKER,
    );
    procs.push(worker);
    await worker.waitForLog('BROKE checks');
    expect(await worker.exited).toBe(1);
    expect(worker.logs()).toContain(
      'error: the worker role failed: the checks consumer stopped taking jobs: its BullMQ worker ended its run loop without being closed (ERR_ROLE_FAILED)\n',
    );
    expect(worker.logs()).toMatch(/"role":"worker","state":"failed"/);
    expect(worker.logs()).not.toContain('"msg":"stopped"');
  });

  test('egress up whose private redis-server is killed exits 1, naming it', async () => {
    const dataDir = await tempDir('role-failure-up-');
    const up = spawnEgress(['up', '--data-dir', dataDir, '--port', String(await freePort()), '--shutdown-grace', '1s', '--prefix', uniquePrefix()]);
    procs.push(up);
    await up.waitForLog('egress is up');
    const { pid } = JSON.parse(await readFile(join(dataDir, 'redis', SERVER_RECORD), 'utf8')) as { pid: number };
    process.kill(pid, 'SIGKILL');
    expect(await up.exited).toBe(1);
    expect(up.logs()).toContain(`error: the private redis-server (pid ${pid}) was killed by SIGKILL while the roles used it (ERR_REDIS_LOST)\n`);
  });

  test('egress worker whose Redis stays unreachable past --redis-lost-after exits 1, naming the Redis and the flag', async () => {
    const dataDir = await tempDir('role-failure-lost-');
    const port = await freePort();
    const worker = spawnEgress(['worker', '--prefix', uniquePrefix(), '--data-dir', dataDir, '--queues', 'checks', '--redis-lost-after', '1s'], {
      REDIS_URL: `redis://127.0.0.1:${port}`,
    });
    procs.push(worker);
    expect(await worker.exited).toBe(1);
    expect(worker.logs()).toMatch(
      new RegExp(`error: Redis at 127\\.0\\.0\\.1:${port} could not be reached for 1s \\(--redis-lost-after\\): .*ECONNREFUSED.* \\(ERR_REDIS_LOST\\)\\n$`),
    );
  });

  test('--redis-lost-after refuses what is not a duration, naming the flag', async () => {
    const run = await runCli(['worker', '--redis-lost-after', 'soon', '--check-config'], { REDIS_URL: inject('redisUrl') });
    expect(run.code).toBe(2);
    expect(run.err).toContain('--redis-lost-after');
    expect(run.err).toContain('expected a duration such as 5m (0 for off), got "soon"');
  });
});
