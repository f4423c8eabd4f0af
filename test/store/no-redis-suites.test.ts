import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';

/**
 * The suites that run on the memory stores (and the memory work requests and probe claims) need no
 * Redis: none of them, nor the helper they share, imports a Redis client, BullMQ or a Redis adapter,
 * or asks for the run's Redis URL. Checked by what the files say, so that a Redis dependency coming
 * back into one of them is a failure here rather than a suite that quietly needs a redis-server.
 * Followed through every module of ours a suite loads (type-only imports load nothing). Their
 * Redis counterparts are the store conformance suites here and test/readiness/probe-claims.test.ts.
 */

const root = join(import.meta.dirname, '..', '..');

const suites = [
  'test/proxies/reconcile.test.ts',
  'test/proxies/reconcile-plan.test.ts',
  'test/proxies/readiness-plan.test.ts',
  'test/pools/reconcile-pool-plan.test.ts',
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

/** A package, or a module of ours (its path from the root), that talks to Redis. */
const redisModule = (spec: string): boolean =>
  spec === 'ioredis' ||
  spec === 'bullmq' ||
  /^src\/store\/redis-[^/]+\.ts$/.test(spec) ||
  /^src\/(store|pools)\/member-replacements\.ts$/.test(spec) ||
  /^src\/redis\/(connections|redis-server)\.ts$/.test(spec) ||
  spec.startsWith('queues/') ||
  /^src\/jobs\/bullmq-/.test(spec);

/** Every module a file loads, followed through our own: packages by name, ours by their path from the root. */
function loadedModules(file: string, seen = new Set<string>()): Set<string> {
  for (const spec of loadedImports(file)) {
    const ours = spec.startsWith('.');
    const id = ours ? relative(root, resolve(root, dirname(file), spec)) : spec;
    if (seen.has(id)) continue;
    seen.add(id);
    if (ours && id.endsWith('.ts')) loadedModules(id, seen);
  }
  return seen;
}

describe('the suites on the memory stores need no Redis', () => {
  test.each(suites)('%s loads no Redis client, BullMQ or Redis adapter, and asks for no Redis URL', (file) => {
    expect([...loadedModules(file)].filter(redisModule)).toEqual([]);
    expect(readFileSync(join(root, file), 'utf8')).not.toMatch(/\binject\(\s*'redisUrl'\s*\)/);
  });

  test('the check sees the imports of a suite that does use Redis', () => {
    expect([...loadedModules('test/readiness/probe-claims.test.ts')].filter(redisModule)).toContain('ioredis');
    // Through our own modules too: the worker's processors load BullMQ.
    expect([...loadedModules('workers/pool-processor.ts')].filter(redisModule)).toContain('bullmq');
  });
});
