import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { expect, test } from 'vitest';
import { RedisBinaryMissingError, startRedisChild } from '../../src/redis/redis-server.ts';

test('egress up’s private redis-server: append-only, noeviction, loopback, stopped on request', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'egress-redis-child-'));
  const child = await startRedisChild({ dir, appendOnly: true });
  const redis = new Redis(child.url);
  try {
    expect(child.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
    expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
    expect(await redis.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
    expect(await redis.config('GET', 'dir')).toEqual(['dir', dir]);
  } finally {
    redis.disconnect();
    await child.stop();
    await rm(dir, { recursive: true, force: true });
  }
  expect(() => process.kill(child.pid, 0)).toThrow();
});

test('without a redis-server binary it says how to get one', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'egress-redis-child-'));
  const err = await startRedisChild({ dir, appendOnly: true, binary: 'redis-server-that-is-not-installed' }).catch((e: unknown) => e);
  await rm(dir, { recursive: true, force: true });
  expect(err).toBeInstanceOf(RedisBinaryMissingError);
  expect((err as Error).message).toBe(
    'cannot start redis-server-that-is-not-installed: not found. Install it (Debian: apt-get install redis-server) or set REDIS_URL to a running Redis',
  );
});

test('with a password: refused without it, the URL carries it, the display URL and the command line do not', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'egress-redis-child-'));
  const password = 'a-password/with+characters=';
  const child = await startRedisChild({ dir, appendOnly: true, password });
  const anonymous = new Redis(`redis://127.0.0.1:${child.port}`, {
    lazyConnect: true,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  anonymous.on('error', () => undefined);
  const authed = new Redis(child.url);
  try {
    await anonymous.connect();
    await expect(anonymous.ping()).rejects.toThrow(/NOAUTH/);
    expect(await authed.ping()).toBe('PONG');
    expect(child.displayUrl).toBe(`redis://:[redacted]@127.0.0.1:${child.port}`);
    expect(await readFile(`/proc/${child.pid}/cmdline`, 'utf8')).not.toContain(password);
    // The configuration holding the password is this user's alone, and so is every file Redis writes.
    expect((await stat(join(dir, 'redis.conf'))).mode & 0o777).toBe(0o600);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    await authed.set('k', 'v');
    const aofDir = join(dir, 'appendonlydir');
    for (const f of await readdir(aofDir)) expect([f, (await stat(join(aofDir, f))).mode & 0o777]).toEqual([f, 0o600]);
    expect(child.diesWithOwner).toBe(true);
  } finally {
    anonymous.disconnect();
    authed.disconnect();
    await child.stop();
    await rm(dir, { recursive: true, force: true });
  }
});
