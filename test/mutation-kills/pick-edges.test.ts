/**
 * Edges of picks (src/pools/pick-service.ts) found unchecked by the mutation run: what a 404 says, a
 * sorted set holding a member the API was not given, and the all-blocked wording without a domain.
 * See pick-session.test.ts and docs/testing.md#mutation-testing.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { PickKeys } from '../../src/pools/pick-keys.ts';
import type { PickableMember, PoolMemberCache, PoolSnapshot } from '../../src/pools/pick-members.ts';
import { NoEligibleMemberError, PoolPicker } from '../../src/pools/pick-service.ts';
import { uniquePrefix } from '../support/config.ts';

function snapshot(names: string[]): PoolSnapshot {
  const members: PickableMember[] = names.map((name) => ({ name, proxyUrl: `http://127.0.0.1/${name}` }));
  return {
    pool: { spec: {} } as PoolSnapshot['pool'],
    members,
    byName: new Map(members.map((m) => [m.name, m])),
    names: names.join('\n'),
    version: `v-${names.join(',')}`,
  };
}

describe('pick edges', () => {
  const keys = new PickKeys(uniquePrefix());
  let redis: Redis;
  const pools = new Map<string, PoolSnapshot>();
  let picker: PoolPicker;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    const members = { get: async (pool: string) => pools.get(pool) } as unknown as PoolMemberCache;
    picker = new PoolPicker({ redis, keys, members, sessionTtlMs: 60_000, counter: { picked: () => undefined } });
  });
  afterAll(async () => {
    await redis.quit();
  });

  test('an unknown pool is a 404 naming it, for a pick, a HEAD and a session lookup', async () => {
    await expect(picker.pick('nowhere', {})).rejects.toThrow('pool "nowhere" not found');
    await expect(picker.readyMembers('nowhere')).rejects.toThrow('pool "nowhere" not found');
    await expect(picker.memberOf('nowhere', 's')).rejects.toThrow('pool "nowhere" not found');
  });

  test('a member in Redis that the API was not given is never handed out', async () => {
    pools.set('odd', snapshot(['m1']));
    await picker.pick('odd', {});
    // Another writer left a name in the round robin under the same member-list version.
    await redis.zadd(keys.lru('odd'), -1, 'intruder');
    await expect(picker.pick('odd', {})).rejects.toThrow('pick script chose "intruder", not a member it was given');
  });

  test('all blocked without a domain named says "this domain"', () => {
    expect(new NoEligibleMemberError('p', 'all-blocked', undefined).message).toBe(
      'every Ready member of pool "p" is blocked for this domain (reported through feedback; blocks end after --feedback-block-cooldown)',
    );
  });
});
