import { once } from 'node:events';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import type { AppConfig } from '../../src/config/app.ts';
import { createLogger, silentLogger } from '../../src/logging.ts';
import { SchedulerRole, type LeadershipRound } from '../../src/scheduler/scheduler-role.ts';
import { RedisStatusStore } from '../../src/store/redis-status-store.ts';
import { testConfig, uniquePrefix } from '../support/config.ts';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function connect(): Redis {
  const redis = new Redis(inject('redisUrl'));
  cleanups.push(() => redis.quit());
  return redis;
}

function scheduler(config: AppConfig, redis = connect()): SchedulerRole {
  const store = new RedisStatusStore(redis, config.redis.prefix);
  const role = new SchedulerRole({ config, redisTarget: inject('redisUrl'), redis, store, logger: silentLogger() });
  cleanups.push(() => role.close());
  cleanups.push(() => store.close());
  return role;
}

function checksQueue(prefix: string): Queue {
  const q = new Queue(QUEUES.checks, { connection: redisOptions(inject('redisUrl'), 'worker'), prefix });
  cleanups.push(async () => {
    await q.obliterate({ force: true });
    await q.close();
  });
  return q;
}

describe('scheduler', () => {
  test('the first leader creates one check scheduler per provider, which run at once', async () => {
    const config = testConfig({
      providers: [
        { name: 'a', type: 'local' },
        { name: 'b', type: 'local' },
      ],
      intervalMs: 60_000,
    });
    const queue = checksQueue(config.redis.prefix);
    const s = scheduler(config);
    const leading = once(s, 'leading');
    s.start();
    const [round] = (await leading) as [LeadershipRound];
    expect(round.schedules.created.sort()).toEqual(['a', 'b']);
    expect(round.checkedNow.sort()).toEqual(['a', 'b']);
    const schedulers = await queue.getJobSchedulers(0, -1);
    expect(schedulers.map((x) => [x.key, x.every])).toEqual(
      expect.arrayContaining([
        ['check-a', 60_000],
        ['check-b', 60_000],
      ]),
    );
    // A new job scheduler produces its first job immediately: one due check per provider.
    const due = await queue.getJobs(['waiting', 'delayed', 'prioritized']);
    const now = Date.now();
    const dueNow = due.filter((j) => j.timestamp + (j.delay ?? 0) <= now + 1000).map((j) => (j.data as { provider: string }).provider);
    expect(dueNow.sort()).toEqual(['a', 'b']);
  });

  test('a restart leaves unchanged schedulers alone, starts a round at once, and removes what is no longer configured', async () => {
    const prefix = uniquePrefix();
    const queue = checksQueue(prefix);
    const first = testConfig({
      prefix,
      providers: [
        { name: 'a', type: 'local' },
        { name: 'gone', type: 'local' },
      ],
      intervalMs: 60_000,
    });
    const redis = connect();
    const store = new RedisStatusStore(redis, prefix);
    cleanups.push(() => store.close());
    const s1 = scheduler(first, redis);
    const led = once(s1, 'leading');
    s1.start();
    await led;
    await s1.close();
    // ProviderHealth exists for both providers, as the publisher would have written.
    for (const name of ['a', 'gone']) {
      await store.updateProviderHealth(name, () => ({ name, status: { ready: true, lastTransitionTime: 'x', lastCheckTime: 'x', targets: [] } }));
    }

    const second = testConfig({ prefix, providers: [{ name: 'a', type: 'local' }], intervalMs: 60_000 });
    const s2 = scheduler(second, redis);
    const leading = once(s2, 'leading');
    s2.start();
    const [round] = (await leading) as [LeadershipRound];
    expect(round.schedules).toEqual({ created: [], updated: [], unchanged: ['a'], removed: ['gone'] });
    expect(round.deletedHealth).toEqual(['gone']);
    expect((await queue.getJobSchedulers(0, -1)).map((x) => x.key)).toEqual(['check-a']);
    expect((await store.listProviderHealth()).map((p) => p.name)).toEqual(['a']);
    const pending = (await queue.getJobs(['waiting', 'delayed', 'prioritized'])).map((j) => j.data as { provider: string; trigger: string });
    // The removed provider's already-produced check went with its scheduler.
    expect(pending.filter((d) => d.provider === 'gone')).toEqual([]);
    expect(pending.filter((d) => d.trigger === 'startup')).toEqual([{ provider: 'a', trigger: 'startup' }]);
  });

  test('a changed interval updates the scheduler; interval 0 removes them all', async () => {
    const prefix = uniquePrefix();
    const queue = checksQueue(prefix);
    for (const [intervalMs, expected] of [
      [60_000, { created: ['local'], updated: [], unchanged: [], removed: [] }],
      [30_000, { created: [], updated: ['local'], unchanged: [], removed: [] }],
      [0, { created: [], updated: [], unchanged: [], removed: ['local'] }],
    ] as const) {
      const s = scheduler(testConfig({ prefix, intervalMs }));
      const leading = once(s, 'leading');
      s.start();
      const [round] = (await leading) as [LeadershipRound];
      expect(round.schedules).toEqual(expected);
      await s.close();
    }
    expect(await queue.getJobSchedulers(0, -1)).toEqual([]);
  });

  test('only one scheduler leads; a standby takes over when the leader dies', async () => {
    const config = testConfig({ intervalMs: 60_000, leaseMs: 400 });
    checksQueue(config.redis.prefix);
    const leaderRedis = new Redis(inject('redisUrl'));
    const a = scheduler(config, leaderRedis);
    const b = scheduler(config);
    const aLeads = once(a, 'leading');
    a.start();
    await aLeads;
    const bLeads = once(b, 'leading');
    b.start();
    // b keeps trying while a renews; it must not lead as long as a is alive.
    expect(b.leader).toBe(false);
    // The leader dies without handing the lease back: its connection is cut and it stops renewing.
    leaderRedis.disconnect();
    const [round] = (await bLeads) as [LeadershipRound];
    expect(b.leader).toBe(true);
    expect(round.schedules.unchanged).toEqual(['local']);
    expect(round.checkedNow).toEqual(['local']);
  });

  test('a leader that closes hands the lease over at once', async () => {
    const config = testConfig({ intervalMs: 60_000, leaseMs: 600_000 });
    checksQueue(config.redis.prefix);
    const a = scheduler(config);
    const b = scheduler(config);
    const aLeads = once(a, 'leading');
    a.start();
    await aLeads;
    b.start();
    const bLeads = once(b, 'leading');
    await a.close();
    // With a 10-minute lease, b can only lead this soon because a released it.
    await bLeads;
    expect(b.leader).toBe(true);
  });
});

describe('a configuration that drops every provider', () => {
  /** A logger whose warn-and-above lines land in `lines` (parsed). */
  function capturingLogger(): { logger: ReturnType<typeof createLogger>; lines: { level: number; msg: string; removed?: string[] }[] } {
    const lines: { level: number; msg: string; removed?: string[] }[] = [];
    const logger = createLogger({ level: 'warn', destination: { write: (line: string) => void lines.push(JSON.parse(line)) } });
    return { logger, lines };
  }

  async function lead(config: AppConfig, redis: Redis, logger = silentLogger()): Promise<LeadershipRound> {
    const store = new RedisStatusStore(redis, config.redis.prefix);
    const role = new SchedulerRole({ config, redisTarget: inject('redisUrl'), redis, store, logger });
    const leading = once(role, 'leading');
    role.start();
    const [round] = (await leading) as [LeadershipRound];
    await role.close();
    await store.close();
    return round;
  }

  test('removing the schedules of every provider is logged at warn with their names; removing some is not', async () => {
    const prefix = uniquePrefix();
    checksQueue(prefix);
    const redis = connect();
    const store = new RedisStatusStore(redis, prefix);
    cleanups.push(() => store.close());
    const both = [
      { name: 'a', type: 'local' },
      { name: 'b', type: 'local' },
    ] as const;
    await lead(testConfig({ prefix, providers: [...both], intervalMs: 60_000, gcIntervalMs: 60_000 }), redis);
    for (const name of ['a', 'b']) {
      await store.updateProviderHealth(name, () => ({ name, status: { ready: true, lastTransitionTime: 'x', lastCheckTime: 'x', targets: [] } }));
    }

    // Dropping one of two: an ordinary change, no warning.
    const some = capturingLogger();
    await lead(testConfig({ prefix, providers: [both[0]], intervalMs: 60_000, gcIntervalMs: 60_000 }), redis, some.logger);
    expect(some.lines).toEqual([]);

    // Dropping all of them (an empty configuration): one warning naming them.
    await lead(testConfig({ prefix, providers: [...both], intervalMs: 60_000, gcIntervalMs: 60_000 }), redis);
    const all = capturingLogger();
    const round = await lead(testConfig({ prefix, providers: [], intervalMs: 60_000, gcIntervalMs: 60_000 }), redis, all.logger);
    expect(round.schedules.removed.sort()).toEqual(['a', 'b']);
    expect(all.lines).toHaveLength(1);
    expect(all.lines[0]).toMatchObject({
      level: 40,
      removed: ['a', 'b'],
      msg: 'no providers configured: removed the schedules and ProviderHealth of every provider (a, b)',
    });
  });

  test('turning checks off (interval 0) for configured providers is not a warning', async () => {
    const prefix = uniquePrefix();
    checksQueue(prefix);
    const redis = connect();
    const providers = [{ name: 'a', type: 'local' }] as const;
    await lead(testConfig({ prefix, providers: [...providers], intervalMs: 60_000, gcIntervalMs: 60_000 }), redis);
    const off = capturingLogger();
    const round = await lead(testConfig({ prefix, providers: [...providers], intervalMs: 0, gcIntervalMs: 0 }), redis, off.logger);
    expect(round.schedules.removed).toEqual(['a']);
    expect(off.lines).toEqual([]);
  });
});

describe('a leader that cannot lead', () => {
  test('fails its role with the cause (run() rejects), and hands the lease back when closed', async () => {
    const config = testConfig({ intervalMs: 60_000 });
    const redis = connect();
    const store = new RedisStatusStore(redis, config.redis.prefix);
    cleanups.push(() => store.close());
    // The store refuses what the lead round needs (a Kubernetes store without the right, say).
    const refusing = Object.assign(Object.create(store) as RedisStatusStore, {
      listProviderHealth: () => Promise.reject(new Error('providerhealths is forbidden')),
    });
    const states: string[] = [];
    const s = new SchedulerRole({
      config,
      redisTarget: inject('redisUrl'),
      redis,
      store: refusing,
      logger: silentLogger(),
      onState: (_role, state) => void states.push(state),
    });
    s.on('error', () => undefined);
    cleanups.push(() => s.close());
    s.start();
    await expect(s.status.run()).rejects.toMatchObject({
      code: 'ERR_ROLE_FAILED',
      role: 'scheduler',
      message: 'the scheduler role failed: taking the lead failed: providerhealths is forbidden',
    });
    expect(s.status.state).toBe('failed');
    expect(states).toEqual(['starting', 'running', 'failed']);
    await s.close();
    // Handed back: the next scheduler leads at once.
    const next = scheduler(config);
    const leading = once(next, 'leading');
    next.start();
    await leading;
    expect(next.leader).toBe(true);
  });
});
