import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';

/**
 * The suites that run on the memory stores (and the memory work requests and probe claims) need no
 * Redis: none of them, nor the helper they share, imports a Redis client, BullMQ or a Redis adapter,
 * or asks for the run's Redis URL. Checked by what the files say, so that a Redis dependency coming
 * back into one of them is a failure here rather than a suite that quietly needs a redis-server.
 * Direct imports only: reconcile-pool.test.ts takes `memberChanged` from workers/pool-processor.ts,
 * which loads BullMQ's module (and opens nothing). Their Redis counterparts are the store
 * conformance suites here and test/readiness/probe-claims.test.ts.
 */

const root = join(import.meta.dirname, '..', '..');

const suites = [
  'test/proxies/reconcile.test.ts',
  'test/pools/reconcile-pool.test.ts',
  'test/readiness/eviction.test.ts',
  'test/readiness/observer-errors.test.ts',
  'test/readiness/probe.test.ts',
  'test/support/probe-loop-fixtures.ts',
];

/** The modules a file loads: every `import … from` and `export … from` but the type-only ones. */
function loadedImports(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/^(?:import|export)\s+(type\s+)?[^;]*?\bfrom\s+'([^']+)'/gms)].filter((m) => !m[1]).map((m) => m[2] ?? '');
}

const redisModule = (spec: string): boolean =>
  spec === 'ioredis' ||
  spec === 'bullmq' ||
  /\/src\/store\/redis-[^/]+\.ts$/.test(spec) ||
  /\/src\/(store|pools)\/member-replacements\.ts$/.test(spec) ||
  /\/src\/redis\/(connections|redis-server)\.ts$/.test(spec) ||
  spec.startsWith('../../queues/') ||
  /\/src\/jobs\/bullmq-/.test(spec);

describe('the suites on the memory stores need no Redis', () => {
  test.each(suites)('%s loads no Redis client, BullMQ or Redis adapter, and asks for no Redis URL', (file) => {
    expect(loadedImports(file).filter(redisModule)).toEqual([]);
    expect(readFileSync(join(root, file), 'utf8')).not.toMatch(/\binject\(\s*'redisUrl'\s*\)/);
  });

  test('the check sees the imports of a suite that does use Redis', () => {
    expect(loadedImports('test/readiness/probe-claims.test.ts').filter(redisModule)).toEqual(['ioredis']);
    expect(loadedImports('test/support/probe-loop-fixtures.ts')).not.toContain('../../src/redis/connections.ts');
  });
});
