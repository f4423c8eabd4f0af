import type {} from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startRedisChild, type RedisChild } from '../../src/redis/redis-server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

let redis: RedisChild | undefined;
let dir: string | undefined;

/**
 * One private redis-server for the whole run; tests isolate themselves by key prefix. It has a
 * password, as `egress up`'s own has: `redisUrl` carries it, so every role and client in the
 * tests proves it works with one.
 */
export async function setup(project: TestProject): Promise<void> {
  dir = await mkdtemp(join(tmpdir(), 'egress-test-redis-'));
  redis = await startRedisChild({ dir, appendOnly: false, password: randomBytes(24).toString('base64url') });
  project.provide('redisUrl', redis.url);
}

export async function teardown(): Promise<void> {
  await redis?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}
