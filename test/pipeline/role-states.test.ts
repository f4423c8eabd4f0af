/**
 * Roles with a state and a failure (src/roles/role-lifecycle.ts), through runRoles: each role is
 * starting → running → draining → stopped, or failed; a failed role makes `run()` reject with the
 * cause; a shutdown whose closes hang is bounded and lists what did not close.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { RoleName } from '../../src/cli/start-roles.ts';
import { freezeConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import { SERVER_RECORD } from '../../src/redis/private-redis.ts';
import { freePort, startRedisChild, type RedisChild } from '../../src/redis/redis-server.ts';
import { RedisLostError } from '../../src/redis/redis-lost.ts';
import { RoleFailedError, ShutdownError, type RoleState } from '../../src/roles/role-lifecycle.ts';
import { testConfig } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';

function recorder(): { seen: string[]; onRoleState: (role: RoleName, state: RoleState, cause?: Error) => void } {
  const seen: string[] = [];
  return { seen, onRoleState: (role, state, cause) => void seen.push(cause ? `${role} ${state}: ${cause.message}` : `${role} ${state}`) };
}

describe('role states', () => {
  test('each role goes starting → running, and on close draining → stopped; run() resolves once all stopped', async () => {
    const { seen, onRoleState } = recorder();
    const running = await runRoles(testConfig(), ['publisher', 'worker'], silentLogger(), { onRoleState });
    expect(seen).toEqual(['publisher starting', 'publisher running', 'worker starting', 'worker running']);
    expect(Object.fromEntries([...running.roles].map(([role, status]) => [role, status.state]))).toEqual({ publisher: 'running', worker: 'running' });
    const ended = running.run();
    await running.close();
    await expect(ended).resolves.toBeUndefined();
    // Closed in reverse start order.
    expect(seen.slice(4)).toEqual(['worker draining', 'worker stopped', 'publisher draining', 'publisher stopped']);
    expect([...running.roles.values()].map((s) => [s.state, s.failure])).toEqual([
      ['stopped', undefined],
      ['stopped', undefined],
    ]);
  });

  test('a role whose consumer cannot run fails: run() rejects with the role and the cause; the other roles run on until close()', async () => {
    const { seen, onRoleState } = recorder();
    const running = await runRoles(testConfig(), ['publisher', 'worker'], silentLogger(), { onRoleState });
    try {
      const [checks] = running.worker?.workers ?? [];
      // Its BullMQ worker closed underneath it: the consumer takes no more jobs.
      await checks?.close();
      const err = await running.run().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RoleFailedError);
      expect(err).toMatchObject({
        code: 'ERR_ROLE_FAILED',
        role: 'worker',
        message: 'the worker role failed: the checks consumer stopped taking jobs: its BullMQ worker ended its run loop without being closed',
      });
      expect((err as Error).cause).toMatchObject({ code: 'ERR_CONSUMER_FAILED', queue: 'checks' });
      expect(running.roles.get('worker')?.state).toBe('failed');
      expect(running.roles.get('worker')?.failure?.message).toMatch(/^the checks consumer stopped taking jobs/);
      expect(running.roles.get('publisher')?.state).toBe('running');
      expect(seen).toContain('worker failed: the checks consumer stopped taking jobs: its BullMQ worker ended its run loop without being closed');
    } finally {
      await running.close();
    }
    // A failed role is drained all the same and stays failed; the others stop.
    expect(running.roles.get('worker')?.state).toBe('failed');
    expect(running.roles.get('publisher')?.state).toBe('stopped');
  });
});

describe('a shutdown whose closes hang', () => {
  let redis: RedisChild;
  let running: RunningRoles | undefined;
  beforeAll(async () => {
    redis = await startRedisChild({ dir: await tempDir('role-states-redis-'), appendOnly: false });
  });
  afterAll(async () => {
    process.kill(redis.pid, 'SIGCONT');
    await running?.close().catch(() => undefined);
    await redis.stop();
  });

  test('is bounded, and rejects with a ShutdownError listing every close that failed; the role that did not close ends failed', async () => {
    const base = testConfig();
    const config = freezeConfig({ ...base, redis: { ...base.redis, url: redis.url }, shutdownGraceMs: 200 });
    const { seen, onRoleState } = recorder();
    running = await runRoles(config, ['publisher'], silentLogger(), { onRoleState });
    // Redis stops answering (its process frozen: connections stay open, nothing comes back).
    process.kill(redis.pid, 'SIGSTOP');
    const err = await running.close().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ShutdownError);
    const errors = (err as ShutdownError).errors;
    expect(errors).toContainEqual(expect.objectContaining({ code: 'ERR_CLOSE_TIMEOUT', what: 'the results worker' }));
    expect((err as ShutdownError).message).toMatch(/^the shutdown did not end cleanly \(\d+ steps? failed\): .*the results worker did not close within \d+ ms/);
    expect(running.roles.get('publisher')?.state).toBe('failed');
    expect(seen).toContain('publisher draining');
    expect(seen.at(-1)).toMatch(
      /^publisher failed: the shutdown of the publisher role did not end cleanly \(1 step failed\): the results worker did not close/,
    );
    // Closing again is the same close.
    await expect(running.close()).rejects.toBe(err);
  });
});

describe('the private redis-server', () => {
  test('exiting under the roles fails the process: run() rejects with a RedisLostError naming it', async () => {
    const base = testConfig();
    const config = freezeConfig({ ...base, redis: { url: undefined, prefix: base.redis.prefix }, shutdownGraceMs: 200 });
    const running = await runRoles(config, ['publisher'], silentLogger());
    try {
      const { pid } = JSON.parse(await readFile(join(config.dataDir, 'redis', SERVER_RECORD), 'utf8')) as { pid: number };
      expect(pid).toBeGreaterThan(0);
      process.kill(pid, 'SIGKILL');
      const err = await running.run().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLostError);
      expect(err).toMatchObject({ code: 'ERR_REDIS_LOST', message: `the private redis-server (pid ${pid}) was killed by SIGKILL while the roles used it` });
    } finally {
      await running.close().catch(() => undefined);
    }
  });
});

describe('a Redis lost for longer than --redis-lost-after', () => {
  test('while the roles run: run() rejects with a RedisLostError that names the Redis and the budget, and the roles close', async () => {
    const dir = await tempDir('redis-lost-');
    const redis = await startRedisChild({ dir, appendOnly: false });
    const base = testConfig();
    const config = freezeConfig({ ...base, redis: { url: redis.url, prefix: base.redis.prefix, lostAfterMs: 500 }, shutdownGraceMs: 200 });
    const { seen, onRoleState } = recorder();
    const running = await runRoles(config, ['publisher'], silentLogger(), { onRoleState });
    try {
      await redis.stop();
      const err = await running.run().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLostError);
      expect(err).toMatchObject({ code: 'ERR_REDIS_LOST' });
      expect((err as Error).message).toMatch(new RegExp(`^Redis at 127\\.0\\.0\\.1:${redis.port} could not be reached for 500ms \\(--redis-lost-after\\)`));
    } finally {
      await running.close().catch(() => undefined);
      await redis.stop();
    }
    // Closed, not left running: with its Redis gone its worker cannot close cleanly, and says so.
    expect(seen.at(-1)).toMatch(/^publisher (stopped|failed: the shutdown of the publisher role did not end cleanly)/);
  });

  test('at the start: runRoles rejects with the RedisLostError instead of waiting for ever', async () => {
    const base = testConfig();
    const port = await freePort();
    const config = freezeConfig({ ...base, redis: { url: `redis://127.0.0.1:${port}`, prefix: base.redis.prefix, lostAfterMs: 300 } });
    const err = await runRoles(config, ['publisher', 'scheduler'], silentLogger()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisLostError);
    expect((err as Error).message).toMatch(
      new RegExp(`^Redis at 127\\.0\\.0\\.1:${port} could not be reached for 300ms \\(--redis-lost-after\\): .*ECONNREFUSED`),
    );
  });
});
