/**
 * The MemberReplacements conformance suite (src/store/member-replacements.ts): the rules ban
 * feedback and the pool reconcile rely on, run against the Redis requests (the run's redis-server)
 * and the in-memory ones the pure pool tests use.
 */
import { describe, expect, it } from 'vitest';
import { RedisMemberReplacements, type MemberReplacements } from '../../src/store/member-replacements.ts';
import { MemoryMemberReplacements } from '../../src/store/memory-member-replacements.ts';
import { memoryStoreHarness, redisStoreHarness, useStores, type StoreHarness } from './store-harness.ts';

type Replacements = MemberReplacements & { close(): Promise<void> };

const T0 = new Date('2026-11-01T10:00:00.000Z');
const now = (): Date => T0;
const closing = (r: MemberReplacements): Replacements => Object.assign(r, { close: async () => undefined });

function redisHarness(): StoreHarness<Replacements> {
  return redisStoreHarness((redis, prefix) => closing(new RedisMemberReplacements(redis, prefix, now)));
}

function memoryHarness(): StoreHarness<Replacements> {
  return memoryStoreHarness(() => closing(new MemoryMemberReplacements(now)));
}

const ended = (): AbortSignal => {
  const c = new AbortController();
  c.abort(new Error('job deadline'));
  return c.signal;
};

describe.each([redisHarness(), memoryHarness()])('MemberReplacements conformance: $name', (h) => {
  const make = useStores(h);

  it('the first request for a member wins: a second resolves false and keeps the first reason and time', async () => {
    const r = await make();
    expect((await r.list('p')).size).toBe(0);
    expect(await r.request('p', 'p-aaaaa', 'blocked on 3 domains within 10m')).toBe(true);
    expect(await r.request('p', 'p-aaaaa', 'another reason')).toBe(false);
    expect(await r.request('p', 'p-bbbbb', 'blocked')).toBe(true);
    expect([...(await r.list('p')).entries()].sort()).toEqual([
      ['p-aaaaa', { reason: 'blocked on 3 domains within 10m', requestedAt: T0.toISOString() }],
      ['p-bbbbb', { reason: 'blocked', requestedAt: T0.toISOString() }],
    ]);
    expect((await r.list('q')).size).toBe(0);
  });

  it('clear forgets the members named, and only them; clearing nothing is no error', async () => {
    const r = await make();
    await r.request('p', 'p-aaaaa', 'x');
    await r.request('p', 'p-bbbbb', 'y');
    await r.clear('p', ['p-aaaaa', 'p-none']);
    expect([...(await r.list('p')).keys()]).toEqual(['p-bbbbb']);
    await r.clear('p', []);
    await r.clear('q', ['q-aaaaa']);
    await r.clear('p', ['p-bbbbb']);
    expect((await r.list('p')).size).toBe(0);
    expect(await r.request('p', 'p-aaaaa', 'again')).toBe(true);
  });

  it('hands out copies, and a call whose signal has ended rejects and writes nothing', async () => {
    const r = await make();
    await expect(r.request('p', 'p-aaaaa', 'x', ended())).rejects.toThrow('job deadline');
    expect((await r.list('p')).size).toBe(0);
    await r.request('p', 'p-aaaaa', 'x');
    await expect(r.clear('p', ['p-aaaaa'], ended())).rejects.toThrow('job deadline');
    const listed = await r.list('p');
    listed.get('p-aaaaa')!.reason = 'mutated';
    listed.delete('p-aaaaa');
    expect((await r.list('p')).get('p-aaaaa')?.reason).toBe('x');
  });
});
