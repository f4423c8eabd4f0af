/**
 * Picks and sessions on the run's Redis, with the pool's members given directly (a stand-in for the
 * member cache): the pick script's choices, a session's life (its TTL renewed by every kept pick),
 * the 404/503 cases, and the parsing of the session and domain parameters. The same through the API
 * on two replicas is in test/pools/pick.test.ts. Written for the mutation run
 * (docs/testing.md#mutation-testing).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { NotFoundError } from '../../src/errors.ts';
import { PickKeys } from '../../src/pools/pick-keys.ts';
import type { PickableMember, PoolMemberCache, PoolSnapshot } from '../../src/pools/pick-members.ts';
import { NoEligibleMemberError, PoolPicker, type PickCounter } from '../../src/pools/pick-service.ts';
import { DOMAIN_MAX, parseDomain, parseSession, PickInputError, SESSION_MAX } from '../../src/pools/session-id.ts';
import { uniquePrefix } from '../support/config.ts';

const TTL_MS = 60_000;

function snapshot(names: string[], version = names.join(',')): PoolSnapshot {
  const members: PickableMember[] = names.map((name) => ({ name, proxyUrl: `http://u:p@127.0.0.1/${name}` }));
  return {
    pool: { spec: {} } as PoolSnapshot['pool'],
    members,
    byName: new Map(members.map((m) => [m.name, m])),
    names: names.join('\n'),
    version,
  };
}

/** The member cache as picks read it: the pools it holds now (a test changes them between picks). */
class Members {
  readonly pools = new Map<string, PoolSnapshot>();
  get = async (pool: string): Promise<PoolSnapshot | undefined> => this.pools.get(pool);
}

describe('PoolPicker on Redis', () => {
  const prefix = uniquePrefix();
  const keys = new PickKeys(prefix);
  let redis: Redis;
  const members = new Members();
  const counted: string[] = [];
  const counter: PickCounter = { picked: (pool, result) => counted.push(`${pool}:${result}`) };
  let picker: PoolPicker;

  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    picker = new PoolPicker({ redis, keys, members: members as unknown as PoolMemberCache, sessionTtlMs: TTL_MS, counter });
  });
  afterAll(async () => {
    await redis.quit();
  });

  test('without a session: every member once before any twice, least recently picked first (ties by name)', async () => {
    members.pools.set('rr', snapshot(['c', 'a', 'b']));
    const picked: string[] = [];
    for (let i = 0; i < 6; i++) {
      const p = await picker.pick('rr', {});
      expect(p).toEqual({ pool: 'rr', member: { name: p.member.name, proxyUrl: `http://u:p@127.0.0.1/${p.member.name}` }, outcome: 'new' });
      picked.push(p.member.name);
    }
    expect(picked).toEqual(['a', 'b', 'c', 'a', 'b', 'c']);
    expect(counted.filter((c) => c.startsWith('rr:'))).toEqual(Array(6).fill('rr:new'));
  });

  test('a session keeps its member, and each kept pick renews its TTL', async () => {
    members.pools.set('sticky', snapshot(['m1', 'm2', 'm3']));
    const first = await picker.pick('sticky', { session: 's-1' });
    expect(first).toMatchObject({ outcome: 'new', session: { id: 's-1', ttlMs: TTL_MS } });
    const sessionKey = keys.session('sticky', 's-1');
    // Most of the session's life has passed: a kept pick must give it a whole TTL again.
    await redis.pexpire(sessionKey, 1000);
    const again = await picker.pick('sticky', { session: 's-1' });
    expect(again).toMatchObject({ outcome: 'kept', member: first.member, session: { id: 's-1', ttlMs: TTL_MS } });
    expect(await redis.pttl(sessionKey)).toBeGreaterThan(TTL_MS - 10_000);
    expect(await picker.memberOf('sticky', 's-1')).toBe(first.member.name);
  });

  test('a new session is bound for one TTL; a pick without a session binds nothing', async () => {
    members.pools.set('bind', snapshot(['x', 'y']));
    await picker.pick('bind', { session: 'fresh' });
    const ttl = await redis.pttl(keys.session('bind', 'fresh'));
    expect(ttl).toBeGreaterThan(TTL_MS - 10_000);
    expect(ttl).toBeLessThanOrEqual(TTL_MS);
    await picker.pick('bind', {});
    expect(await redis.keys(`${prefix}:pick:bind:session:*`)).toEqual([keys.session('bind', 'fresh')]);
    expect(await picker.memberOf('bind', 'nobody')).toBeUndefined();
  });

  test('sticky picks also move their member to the back: a new session goes to the least used member', async () => {
    members.pools.set('spread', snapshot(['a', 'b']));
    const s = await picker.pick('spread', { session: 'one' });
    expect(s.member.name).toBe('a');
    await picker.pick('spread', { session: 'one' });
    expect((await picker.pick('spread', { session: 'two' })).member.name).toBe('b');
    expect((await picker.pick('spread', {})).member.name).toBe('a');
  });

  test('a member that left: its session moves to another, and the outcome says so', async () => {
    members.pools.set('moving', snapshot(['p', 'q']));
    const first = await picker.pick('moving', { session: 'mv' });
    const other = first.member.name === 'p' ? 'q' : 'p';
    members.pools.set('moving', snapshot([other]));
    const moved = await picker.pick('moving', { session: 'mv' });
    expect(moved).toMatchObject({ outcome: 'moved', member: { name: other }, session: { id: 'mv', ttlMs: TTL_MS } });
    expect(await picker.memberOf('moving', 'mv')).toBe(other);
    expect(counted).toContain('moving:moved');
  });

  test('a member blocked for the domain is skipped and the session moves; other domains keep it', async () => {
    members.pools.set('blocks', snapshot(['b1', 'b2']));
    const first = await picker.pick('blocks', { session: 'bs', domain: 'shop.example' });
    await redis.zadd(keys.blocked('blocks', 'shop.example'), Date.now() + 600_000, first.member.name);
    expect(await picker.pick('blocks', { session: 'bs', domain: 'news.example' })).toMatchObject({ outcome: 'kept', member: first.member });
    const moved = await picker.pick('blocks', { session: 'bs', domain: 'shop.example' });
    expect(moved.outcome).toBe('moved');
    expect(moved.member.name).not.toBe(first.member.name);
    // Without a domain, blocks do not apply.
    await redis.zadd(keys.blocked('blocks', 'shop.example'), Date.now() + 600_000, moved.member.name);
    expect((await picker.pick('blocks', { session: 'bs' })).outcome).toBe('kept');
  });

  test('every member blocked: 503 all-blocked naming the domain; an expired block is lifted', async () => {
    members.pools.set('allblocked', snapshot(['z1', 'z2']));
    const blocked = keys.blocked('allblocked', 'shop.example');
    await redis.zadd(blocked, Date.now() + 600_000, 'z1', Date.now() + 600_000, 'z2');
    const err = await picker.pick('allblocked', { domain: 'shop.example' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoEligibleMemberError);
    expect(err).toMatchObject({
      pool: 'allblocked',
      reason: 'all-blocked',
      code: 'ERR_POOL_NO_MEMBER',
      retryable: true,
      message: 'every Ready member of pool "allblocked" is blocked for shop.example (reported through feedback; blocks end after --feedback-block-cooldown)',
    });
    expect(counted).toContain('allblocked:all-blocked');
    await redis.zadd(blocked, Date.now() - 1, 'z2');
    expect((await picker.pick('allblocked', { domain: 'shop.example' })).member.name).toBe('z2');
  });

  test('a pool of more than 64 members whose first 64 are blocked still picks (the script reads on)', async () => {
    const names = Array.from({ length: 70 }, (_, i) => `w${String(i).padStart(3, '0')}`);
    members.pools.set('big', snapshot(names));
    const until = Date.now() + 600_000;
    await redis.zadd(keys.blocked('big', 'd.example'), ...names.slice(0, 66).flatMap((n) => [until, n]));
    expect((await picker.pick('big', { domain: 'd.example' })).member.name).toBe('w066');
  });

  test('no Ready member: 503 none-ready, counted; an unknown pool: 404', async () => {
    members.pools.set('empty', snapshot([]));
    const err = await picker.pick('empty', { session: 'e' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoEligibleMemberError);
    expect(err).toMatchObject({ reason: 'none-ready', message: 'pool "empty" has no Ready member' });
    expect(counted).toContain('empty:none-ready');
    await expect(picker.pick('nowhere', {})).rejects.toBeInstanceOf(NotFoundError);
    await expect(picker.readyMembers('nowhere')).rejects.toBeInstanceOf(NotFoundError);
    await expect(picker.memberOf('nowhere', 's')).rejects.toBeInstanceOf(NotFoundError);
  });

  test('readyMembers counts without picking: the round robin does not move', async () => {
    members.pools.set('head', snapshot(['h1', 'h2', 'h3']));
    expect(await picker.readyMembers('head')).toBe(3);
    expect((await picker.pick('head', {})).member.name).toBe('h1');
  });

  test('a second picker (another API replica) with the same member list shares the round robin without resending it', async () => {
    members.pools.set('shared', snapshot(['r1', 'r2']));
    const replica = new PoolPicker({ redis, keys, members: members as unknown as PoolMemberCache, sessionTtlMs: TTL_MS, counter });
    expect((await picker.pick('shared', {})).member.name).toBe('r1');
    expect((await replica.pick('shared', {})).member.name).toBe('r2');
    expect(await redis.get(keys.memberVersion('shared'))).toBe('r1,r2');
  });

  test('an aborted pick reads nothing', async () => {
    members.pools.set('abort', snapshot(['a1']));
    await expect(picker.memberOf('abort', 's', AbortSignal.abort())).rejects.toThrow();
  });
});

describe('session and domain parameters', () => {
  test('a session is 1 to 128 letters, digits and _ . ~ : -', () => {
    expect(parseSession('session_AbC-1.2~3:4')).toBe('session_AbC-1.2~3:4');
    expect(parseSession('s'.repeat(SESSION_MAX))).toBe('s'.repeat(128));
    expect(() => parseSession('')).toThrow(new PickInputError('session', 'must not be empty'));
    expect(() => parseSession('s'.repeat(129))).toThrow('session: expected at most 128 characters, got 129');
    expect(() => parseSession('a b')).toThrow('session: expected letters, digits and _ . ~ : - only');
    expect(() => parseSession('a/b', 'sessionId')).toThrow('sessionId: expected letters, digits and _ . ~ : - only');
    expect(() => parseSession('ok\n')).toThrow(PickInputError);
    const err = (() => {
      try {
        parseSession('');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toMatchObject({ parameter: 'session', code: 'ERR_BAD_REQUEST' });
  });

  test('a domain is lower-cased, loses its trailing dot, and international names are punycode', () => {
    expect(parseDomain('WWW.Example.COM.')).toBe('www.example.com');
    expect(parseDomain('bücher.example')).toBe('xn--bcher-kva.example');
    expect(parseDomain('a-b.c0')).toBe('a-b.c0');
  });

  test('a domain that is not a host name is refused naming the parameter', () => {
    expect(() => parseDomain('')).toThrow('domain: must not be empty');
    expect(() => parseDomain('-bad.example')).toThrow('domain: expected a host name such as example.com, got "-bad.example"');
    expect(() => parseDomain('bad-.example')).toThrow(PickInputError);
    expect(() => parseDomain('a..b')).toThrow(PickInputError);
    expect(() => parseDomain('.')).toThrow(PickInputError);
    expect(() => parseDomain('under_score.example', 'site')).toThrow('site: expected a host name');
    expect(() => parseDomain(`${'l'.repeat(64)}.example`)).toThrow(PickInputError);
    expect(parseDomain(`${'l'.repeat(63)}.example`)).toBe(`${'l'.repeat(63)}.example`);
  });

  test('at most 253 characters (one more for a trailing dot)', () => {
    const label = 'a'.repeat(63);
    const longest = [label, label, label, 'b'.repeat(61)].join('.');
    expect(longest).toHaveLength(DOMAIN_MAX);
    expect(parseDomain(longest)).toBe(longest);
    expect(parseDomain(`${longest}.`)).toBe(longest);
    expect(() => parseDomain(`${longest}b`)).toThrow('domain: expected a host name such as example.com');
    expect(() => parseDomain(`${longest}bb`)).toThrow(`domain: expected a host name of at most 253 characters, got 255`);
    expect(() => parseDomain(`x${'y'.repeat(300)}`)).toThrow(`got 301`);
  });

  test('a long bad domain is quoted to its first 100 characters', () => {
    const bad = `${'_'.repeat(150)}`;
    expect(() => parseDomain(bad)).toThrow(`got "${'_'.repeat(100)}"`);
  });
});
