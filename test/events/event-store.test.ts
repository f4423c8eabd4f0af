/**
 * The event store's rules, written once and run against the Redis stream store on the run's
 * redis-server and the memory one pure tests use: retention by count and by age, the filters,
 * `since` as a cursor and as a time, which end `limit` keeps, and the stream key carrying the
 * fleet's hash-tagged prefix.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { EgressEvent, EventQuery, EventRetention, EventStore, NewEvent } from '../../src/events/event-sink.ts';
import { MemoryEventStore } from '../../src/events/memory-event-store.ts';
import { RedisEventStore } from '../../src/events/redis-event-store.ts';
import { silentLogger } from '../../src/logging.ts';
import { uniquePrefix } from '../support/config.ts';

interface Harness {
  name: string;
  /** A new, empty store; `old` appends an event dated `ageMs` in the past, as if recorded then. */
  make(retention: EventRetention): { store: EventStore; old: (event: NewEvent, ageMs: number) => Promise<void> };
}

let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject('redisUrl'));
});
afterAll(async () => {
  await redis.quit();
});

const redisHarness: Harness = {
  name: 'redis',
  make(retention) {
    const prefix = uniquePrefix();
    const store = new RedisEventStore(redis, prefix, retention, silentLogger());
    return {
      store,
      old: async (event, ageMs) => {
        await redis.xadd(store.key, `${Date.now() - ageMs}-0`, 'e', JSON.stringify({ ...event, source: 'test' }));
      },
    };
  },
};

const memoryHarness: Harness = {
  name: 'memory',
  make(retention) {
    let clock: number | undefined;
    const store = new MemoryEventStore(retention, () => clock ?? Date.now());
    return {
      store,
      old: (event, ageMs) => {
        clock = Date.now() - ageMs;
        store.sink('test').record(event);
        clock = undefined;
        return Promise.resolve();
      },
    };
  },
};

function proxyEvent(name: string, reason: NewEvent['reason'] = 'Applied', extra: Partial<NewEvent> = {}): NewEvent {
  return { type: 'Normal', reason, object: { kind: 'Proxy', name }, provider: 'local', message: `${reason} ${name}`, ...extra };
}

const ROOMY: EventRetention = { maxCount: 1000, maxAgeMs: 3_600_000 };

async function all(store: EventStore, query: Partial<EventQuery> = {}): Promise<EgressEvent[]> {
  return store.list({ limit: 1000, ...query });
}

describe.each([redisHarness, memoryHarness])('event store ($name)', (h) => {
  it('keeps events oldest first with an id, a time and the recording role', async () => {
    const { store } = h.make(ROOMY);
    store.sink('api').record(proxyEvent('a'));
    store.sink('worker').record(proxyEvent('a', 'InstanceCreated', { details: { cause: 'apply', instance: 'i-1' } }));
    await store.close();
    const events = await all(store);
    expect(events.map((e) => [e.reason, e.source])).toEqual([
      ['Applied', 'api'],
      ['InstanceCreated', 'worker'],
    ]);
    expect(events[1]?.details).toEqual({ cause: 'apply', instance: 'i-1' });
    const [first, second] = events;
    expect(first?.id).toMatch(/^\d+-\d+$/);
    expect(first?.id).not.toBe(second?.id);
    expect(Math.abs(Date.parse(first?.time ?? '') - Date.now())).toBeLessThan(3_600_000);
  });

  it('keeps at most maxCount events, dropping the oldest', async () => {
    const { store } = h.make({ maxCount: 5, maxAgeMs: 3_600_000 });
    const sink = store.sink('api');
    for (let i = 0; i < 12; i++) sink.record(proxyEvent(`p${i}`));
    await store.close();
    expect((await all(store)).map((e) => e.object.name)).toEqual(['p7', 'p8', 'p9', 'p10', 'p11']);
  });

  it('drops events older than maxAge when the next one is recorded, and never serves them', async () => {
    const { store, old } = h.make({ maxCount: 1000, maxAgeMs: 60_000 });
    await old(proxyEvent('ancient'), 120_000);
    await old(proxyEvent('recent'), 10_000);
    // Until the next write trims them, a read still leaves out what is past the age.
    expect((await all(store)).map((e) => e.object.name)).toEqual(['recent']);
    store.sink('api').record(proxyEvent('now'));
    await store.close();
    expect((await all(store)).map((e) => e.object.name)).toEqual(['recent', 'now']);
    if (h.name === 'redis') expect(await redis.xlen((store as RedisEventStore).key)).toBe(2);
  });

  it('filters by proxy, provider, type, reason and kind', async () => {
    const { store } = h.make(ROOMY);
    const sink = store.sink('worker');
    sink.record(proxyEvent('a'));
    sink.record(proxyEvent('b', 'NotReady', { type: 'Warning', provider: 'gce' }));
    sink.record({ type: 'Warning', reason: 'CheckReasonChanged', object: { kind: 'ProviderHealth', name: 'gce' }, provider: 'gce', message: 'x' });
    sink.record({ type: 'Normal', reason: 'LeaderElected', object: { kind: 'Scheduler', name: 'h/1/abc' }, message: 'y' });
    await store.close();
    const names = async (q: Partial<EventQuery>): Promise<string[]> => (await all(store, q)).map((e) => `${e.object.kind}/${e.object.name}`);
    expect(await names({ proxy: 'b' })).toEqual(['Proxy/b']);
    // proxy= matches the proxy the event is about, not a provider of the same name.
    expect(await names({ proxy: 'gce' })).toEqual([]);
    expect(await names({ provider: 'gce' })).toEqual(['Proxy/b', 'ProviderHealth/gce']);
    expect(await names({ type: 'Warning' })).toEqual(['Proxy/b', 'ProviderHealth/gce']);
    expect(await names({ reason: 'LeaderElected' })).toEqual(['Scheduler/h/1/abc']);
    expect(await names({ kind: 'ProviderHealth', provider: 'gce' })).toEqual(['ProviderHealth/gce']);
    expect(await names({ type: 'Warning', proxy: 'a' })).toEqual([]);
  });

  it('reads after a cursor (exclusive) and from a time (inclusive); limit keeps the newest, or with since the oldest', async () => {
    const { store, old } = h.make(ROOMY);
    await old(proxyEvent('before'), 30_000);
    const sink = store.sink('api');
    for (let i = 0; i < 6; i++) sink.record(proxyEvent(`p${i}`));
    await store.close();
    const everything = await all(store);
    expect(everything.map((e) => e.object.name)).toEqual(['before', 'p0', 'p1', 'p2', 'p3', 'p4', 'p5']);
    const cursor = everything[2]?.id ?? '';
    expect((await all(store, { since: { id: cursor } })).map((e) => e.object.name)).toEqual(['p2', 'p3', 'p4', 'p5']);
    expect((await all(store, { since: { id: everything[6]?.id ?? '' } })).map((e) => e.object.name)).toEqual([]);
    expect((await all(store, { since: { timeMs: Date.now() - 20_000 } })).map((e) => e.object.name)).toEqual(['p0', 'p1', 'p2', 'p3', 'p4', 'p5']);
    expect((await store.list({ limit: 2 })).map((e) => e.object.name)).toEqual(['p4', 'p5']);
    expect((await store.list({ limit: 2, since: { id: cursor } })).map((e) => e.object.name)).toEqual(['p2', 'p3']);
    // A filtered read with a limit still finds matches beyond the first page of non-matching ones.
    expect((await store.list({ limit: 1, proxy: 'before' })).map((e) => e.object.name)).toEqual(['before']);
  });
});

describe('redis event stream', () => {
  it('lives under the fleet prefix (its hash tag keeps it in the slot of every other key) and skips entries it cannot read', async () => {
    const prefix = uniquePrefix();
    const store = new RedisEventStore(redis, prefix, ROOMY, silentLogger());
    expect(store.key).toBe(`${prefix}:events`);
    await redis.xadd(store.key, '*', 'e', 'not json');
    await redis.xadd(store.key, '*', 'e', JSON.stringify({ type: 'Bogus', reason: 'Applied', object: { kind: 'Proxy', name: 'x' }, message: '', source: 's' }));
    store.sink('api').record(proxyEvent('good'));
    await store.close();
    expect((await all(store)).map((e) => e.object.name)).toEqual(['good']);
  });

  it('logs and drops an event it cannot write instead of failing the caller', async () => {
    const broken = new Redis(inject('redisUrl'), { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    const warnings: string[] = [];
    const logger = { ...silentLogger(), warn: (_o: unknown, msg: string) => void warnings.push(msg) } as unknown as ReturnType<typeof silentLogger>;
    const store = new RedisEventStore(broken, uniquePrefix(), ROOMY, logger);
    expect(() => store.sink('api').record(proxyEvent('lost'))).not.toThrow();
    await store.close();
    expect(warnings).toEqual(['could not record an event']);
    broken.disconnect();
  });

  it('closes within its grace while Redis does not answer, saying what was not written', async () => {
    // Retries for ever and queues while offline, as the roles' worker connection does.
    const away = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 50 });
    away.on('error', () => undefined);
    const warnings: unknown[] = [];
    const logger = { ...silentLogger(), warn: (o: unknown, msg: string) => void warnings.push([o, msg]) } as unknown as ReturnType<typeof silentLogger>;
    const store = new RedisEventStore(away, uniquePrefix(), ROOMY, logger);
    store.sink('api').record(proxyEvent('stuck'));
    await store.close(100);
    expect(warnings).toEqual([[{ unwritten: 1 }, 'events not written before shutdown: Redis did not answer']]);
    away.disconnect();
  });
});
