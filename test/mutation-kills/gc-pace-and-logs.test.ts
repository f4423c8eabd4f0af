/**
 * More of the GC sweep (src/proxies/gc.ts) found unchecked by the mutation run: deletes in flight at
 * once under a pace, a budget overrun by a slow listing, the log lines operators read, the real clock
 * by default, and a sweep without an event sink. See gc-scope.test.ts and
 * docs/testing.md#mutation-testing.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, test } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import { ForeignInstanceError, type Instance, type ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { sweepProvider, type GcDeps } from '../../src/proxies/gc.ts';
import type { ProxyReader } from '../../src/store/proxy-store.ts';

const FLEET = 'fleet-a';
const OLD = '2000-01-01T00:00:00.000Z';
const signal = new AbortController().signal;
const none: ProxyReader = { list: async () => [], get: async () => undefined, getMany: async () => [] };

const orphan = (name: string, createdAt = OLD, placement?: string): Instance => ({
  name,
  id: name,
  state: 'running',
  owner: { fleet: FLEET, proxy: name.replace(/^ep-/, '') },
  createdAt,
  ...(placement ? { placement } : {}),
});

function lifecycle(listed: Instance[], remove: (name: string) => Promise<void> = async () => undefined): ProxyLifecycle {
  return {
    ensureInstance: () => Promise.reject(new Error('not used')),
    getInstance: () => Promise.reject(new Error('not used')),
    deleteInstance: (name) => remove(name),
    async *listInstances() {
      yield* listed;
    },
  };
}

const base = (extra: Partial<GcDeps> = {}): GcDeps => ({ proxies: none, fleet: FLEET, graceMs: 60_000, logger: silentLogger(), ...extra });

describe('GC pace, budget and logs', () => {
  test('under a pace, slow deletes overlap (several in flight), as a provider that takes ~30 s per delete needs', async () => {
    const started: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let twoStarted!: () => void;
    const two = new Promise<void>((resolve) => (twoStarted = resolve));
    const life = lifecycle([orphan('ep-a'), orphan('ep-b'), orphan('ep-c')], async (name) => {
      started.push(name);
      if (started.length === 2) twoStarted();
      await gate;
    });
    const sweep = sweepProvider('gcp', life, base({ now: () => new Date('2026-12-01T00:00:00Z'), deletesPerSecond: 1000 }), signal);
    await two;
    release();
    const result = await sweep;
    expect(started.length).toBeGreaterThanOrEqual(2);
    expect(result.deleted).toHaveLength(3);
  });

  test('a budget without a pace is no limit', async () => {
    const result = await sweepProvider(
      'gcp',
      lifecycle([orphan('ep-a'), orphan('ep-b')]),
      base({ now: () => new Date('2026-12-01T00:00:00Z'), deleteBudgetMs: 0 }),
      signal,
    );
    expect(result).toMatchObject({ deleted: [{ name: 'ep-a' }, { name: 'ep-b' }], left: 0 });
  });

  test('a listing that used up the whole budget starts no delete at all', async () => {
    const many = Array.from({ length: 5000 }, (_, i) => orphan(`ep-${i}`));
    const deleted: string[] = [];
    const result = await sweepProvider(
      'gcp',
      lifecycle(many, async (name) => void deleted.push(name)),
      base({ now: () => new Date('2026-12-01T00:00:00Z'), deletesPerSecond: 1000, deleteBudgetMs: 0 }),
      signal,
    );
    expect(result).toMatchObject({ seen: 5000, deleted: [], left: 5000 });
    expect(deleted).toEqual([]);
  });

  test('without a clock given, the real one decides what is young', async () => {
    const justMade = orphan('ep-new', new Date().toISOString());
    const result = await sweepProvider('local', lifecycle([justMade, orphan('ep-old')]), base({ graceMs: 3_600_000 }), signal);
    expect(result).toMatchObject({ young: 1, deleted: [{ name: 'ep-old', reason: 'no-proxy' }] });
  });

  test('without an event sink or a delete counter the sweep still deletes and refuses', async () => {
    const life = lifecycle([orphan('ep-a'), orphan('ep-theirs')], async (name) => {
      if (name === 'ep-theirs') throw new ForeignInstanceError(name, 'it belongs to another fleet');
    });
    const result = await sweepProvider('local', life, base({ now: () => new Date('2026-12-01T00:00:00Z') }), signal);
    expect(result).toMatchObject({ deleted: [{ name: 'ep-a' }], refused: 1 });
  });

  test('each deletion and each refusal is logged with the instance, its proxy and placement', async () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const logger = pino({ level: 'info' }, stream);
    const life = lifecycle([orphan('ep-a', OLD, 'zone-a'), orphan('ep-theirs', OLD, 'zone-b')], async (name) => {
      if (name === 'ep-theirs') throw new ForeignInstanceError(name, 'it belongs to another fleet');
    });
    await sweepProvider('gcp', life, base({ logger, now: () => new Date('2026-12-01T00:00:00Z') }), signal);
    await new Promise<void>((resolve) => stream.end(resolve));
    expect(lines.map(({ msg, instance, proxy, placement, createdAt, reason, err }) => ({ msg, instance, proxy, placement, createdAt, reason, err }))).toEqual([
      {
        msg: 'garbage-collected an instance no proxy owns',
        instance: 'ep-a',
        proxy: 'a',
        placement: 'zone-a',
        createdAt: OLD,
        reason: 'no-proxy',
        err: undefined,
      },
      {
        msg: 'the inventory listed an instance that is not ours: left alone',
        instance: 'ep-theirs',
        proxy: undefined,
        placement: 'zone-b',
        createdAt: undefined,
        reason: undefined,
        err: 'not deleting "ep-theirs": it belongs to another fleet',
      },
    ]);
  });
});
