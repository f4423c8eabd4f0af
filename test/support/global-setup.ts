import type {} from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startRedisChild, type RedisChild } from '../../src/redis/redis-server.ts';
import { processesUnder } from './processes-under.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

let redis: RedisChild | undefined;
let runDir: string | undefined;
let previousTmpdir: string | undefined;

/**
 * One private redis-server for the whole run; tests isolate themselves by key prefix. It has a
 * password, as `egress up`'s own has: `redisUrl` carries it, so every role and client in the
 * tests proves it works with one.
 *
 * Every temporary file of the run lives under one directory: TMPDIR points there for the test
 * workers and every process they start (set before vitest forks them), and teardown removes it,
 * so a test that forgets its own `rm` still leaves nothing in /tmp.
 */
export async function setup(project: TestProject): Promise<void> {
  runDir = await mkdtemp(join(tmpdir(), 'egress-test-run-'));
  previousTmpdir = process.env.TMPDIR;
  process.env.TMPDIR = runDir;
  redis = await startRedisChild({ dir: join(runDir, 'redis'), appendOnly: false, password: randomBytes(24).toString('base64url') });
  project.provide('redisUrl', redis.url);
}

export async function teardown(): Promise<void> {
  await redis?.stop();
  if (previousTmpdir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = previousTmpdir;
  if (!runDir) return;
  const left = await processesUnder(runDir);
  for (const p of left) {
    process.stderr.write(`test run: process ${p.pid} was left running (${p.command.slice(0, 200)}); killing it\n`);
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  // Each test file removes its own temporary directories (test/support/temp-dirs.ts); name any
  // that were left, so that a test that forgets is noticed rather than swept silently. The
  // run's redis and tsx's cache of the spawned processes belong to the run itself.
  const leftDirs = (await readdir(runDir).catch(() => [] as string[])).filter((e) => e !== 'redis' && !e.startsWith('tsx-'));
  if (leftDirs.length > 0) {
    // What each holds says who made it (a data directory's files name the part of the program that wrote them).
    const described = await Promise.all(
      leftDirs.map(async (d) => `${d} [${(await readdir(join(runDir ?? '', d)).catch(() => [] as string[])).slice(0, 10).join(' ')}]`),
    );
    process.stderr.write(`test run: left in the run's temporary directory by tests that did not remove them: ${described.join(', ')}\n`);
  }
  await rm(runDir, { recursive: true, force: true });
}
