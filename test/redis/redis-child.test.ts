import { mkdtemp } from 'node:fs/promises';
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
  }
  expect(() => process.kill(child.pid, 0)).toThrow();
});

test('without a redis-server binary it says how to get one', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'egress-redis-child-'));
  const err = await startRedisChild({ dir, appendOnly: true, binary: 'redis-server-that-is-not-installed' }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(RedisBinaryMissingError);
  expect((err as Error).message).toBe(
    'cannot start redis-server-that-is-not-installed: not found. Install it (Debian: apt-get install redis-server) or set REDIS_URL to a running Redis',
  );
});
