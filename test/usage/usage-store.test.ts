/**
 * The UsageStore conformance suite (src/usage/usage-store.ts), written once and run against the
 * Redis store on the run's redis-server and the in-memory one: traffic by hour and day, the domain
 * bound, retention, instance lives (repeats, out of order, across days, open), cost and poolUsage.
 */
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { MemoryUsageStore } from '../../src/usage/memory-usage-store.ts';
import { priceTableSchema, type PriceTable } from '../../src/usage/prices.ts';
import { RedisUsageStore } from '../../src/usage/redis-usage-store.ts';
import { UsageKeys } from '../../src/usage/usage-scripts.ts';
import { DEFAULT_USAGE_SETTINGS, type UsageSettings, type UsageStore } from '../../src/usage/usage-store.ts';
import type { InstanceRecord, TrafficRecord } from '../../src/usage/usage-types.ts';
import { UsageRecordError, UsageWindowError } from '../../src/usage/usage-window.ts';
import { memoryStoreHarness, redisStoreHarness, useStores, type StoreHarness } from '../store/store-harness.ts';

/** What the next store is made with: each test sets it before `make()`. */
const made: { nowMs: number; prices: PriceTable | undefined; settings: UsageSettings; prefix?: string } = {
  nowMs: Date.parse('2026-11-03T12:00:00Z'),
  prices: undefined,
  settings: DEFAULT_USAGE_SETTINGS,
};
const options = () => ({ now: () => made.nowMs, prices: made.prices, settings: made.settings });

const harnesses: StoreHarness<UsageStore>[] = [
  redisStoreHarness((redis, prefix) => {
    made.prefix = prefix;
    return new RedisUsageStore(redis, prefix, options());
  }),
  memoryStoreHarness(() => new MemoryUsageStore(options())),
];

function traffic(hour: string, over: Partial<TrafficRecord> & { up?: number; down?: number } = {}): TrafficRecord {
  const { up = 100, down = 1000, ...rest } = over;
  return {
    hour,
    proxy: 'p1',
    pool: 'crawl',
    provider: 'gcp',
    domain: 'example.com',
    counts: { bytesUp: up, bytesDown: down, requests: 1, tunnels: 2 },
    ...rest,
  };
}

function life(instance: string, startedAt: string, over: Partial<InstanceRecord> = {}): InstanceRecord {
  return { instance, proxy: `proxy-${instance}`, pool: 'crawl', provider: 'gcp', location: 'europe-west1-b', machineType: 'e2-small', startedAt, ...over };
}

const day = (d: string) => ({ from: new Date(`${d}T00:00:00Z`), to: new Date(Date.parse(`${d}T00:00:00Z`) + 86_400_000) });

describe.each(harnesses)('usage store ($name)', (harness) => {
  const make = useStores(harness);
  const reset = (over: Partial<typeof made> = {}) =>
    Object.assign(made, { nowMs: Date.parse('2026-11-03T12:00:00Z'), prices: undefined, settings: DEFAULT_USAGE_SETTINGS }, over);

  it('sums traffic by day and pool, provider or domain, across hours and calls', async () => {
    reset();
    const store = await make();
    await store.addTraffic([traffic('2026-11-01T10:00:00.000Z'), traffic('2026-11-01T23:00:00.000Z', { domain: 'b.org' })]);
    await store.addTraffic([traffic('2026-11-01T10:00:00.000Z', { proxy: 'p2', pool: undefined, provider: 'vendor' }), traffic('2026-11-02T00:00:00.000Z')]);
    const byPool = await store.query({ from: new Date('2026-11-01T00:00:00Z'), to: new Date('2026-11-03T00:00:00Z'), groupBy: 'pool' });
    expect(byPool.rows.map((r) => [r.day, r.key, r.bytesUp, r.bytesDown, r.requests, r.tunnels])).toEqual([
      ['2026-11-01', '-', 100, 1000, 1, 2],
      ['2026-11-01', 'crawl', 200, 2000, 2, 4],
      ['2026-11-02', 'crawl', 100, 1000, 1, 2],
    ]);
    expect(byPool.totals).toMatchObject({ bytesUp: 400, bytesDown: 4000, requests: 4, tunnels: 8, instances: 0 });
    expect(byPool.currency).toBeNull();
    const byProvider = await store.query({ ...day('2026-11-01'), groupBy: 'provider' });
    expect(byProvider.rows.map((r) => [r.key, r.bytesDown])).toEqual([
      ['gcp', 2000],
      ['vendor', 1000],
    ]);
    const byDomain = await store.query({ ...day('2026-11-01'), groupBy: 'domain' });
    expect(byDomain.rows.map((r) => [r.key, r.bytesDown])).toEqual([
      ['b.org', 1000],
      ['example.com', 2000],
    ]);
  });

  it('counts the whole hours a window overlaps at its edges, and no others', async () => {
    reset();
    const store = await make();
    await store.addTraffic(['08', '09', '10', '11'].map((h) => traffic(`2026-11-01T${h}:00:00.000Z`)));
    const r = await store.query({ from: new Date('2026-11-01T09:30:00Z'), to: new Date('2026-11-01T11:00:00Z'), groupBy: 'pool' });
    expect(r.totals.requests).toBe(2);
  });

  it('keeps at most N domains per pool and hour, the rest as other', async () => {
    reset({ settings: { ...DEFAULT_USAGE_SETTINGS, maxDomainsPerPoolHour: 2 } });
    const store = await make();
    const hour = '2026-11-01T10:00:00.000Z';
    await store.addTraffic(['a.com', 'b.com', 'c.com', 'a.com', 'd.com'].map((domain) => traffic(hour, { domain })));
    await store.addTraffic([
      traffic(hour, { domain: 'e.com' }),
      traffic(hour, { domain: 'e.com', pool: 'other-pool' }),
      traffic('2026-11-01T11:00:00.000Z', { domain: 'e.com' }),
    ]);
    const r = await store.query({ ...day('2026-11-01'), groupBy: 'domain' });
    expect(Object.fromEntries(r.rows.map((x) => [x.key, x.requests]))).toEqual({ 'a.com': 2, 'b.com': 1, other: 3, 'e.com': 2 });
  });

  it('answers rows with cost from the price table', async () => {
    const prices = priceTableSchema.parse({
      currency: 'EUR',
      instanceHour: { gcp: { default: 0.02, 'e2-small': 0.01 } },
      egressGB: { gcp: 0.1 },
      vendorGB: { vendor: 5 },
      ipv4Hour: { gcp: 0.005 },
    });
    reset({ prices, nowMs: Date.parse('2026-11-05T00:00:00Z') });
    const store = await make();
    await store.addTraffic([
      traffic('2026-11-01T10:00:00.000Z', { up: 0, down: 2e9 }),
      traffic('2026-11-01T10:00:00.000Z', { provider: 'vendor', up: 1e9, down: 0 }),
    ]);
    await store.instanceStarted(life('i1', '2026-11-01T00:00:00.000Z'));
    await store.instanceEnded('gcp', 'i1', '2026-11-01T10:00:00.000Z');
    const r = await store.query({ ...day('2026-11-01'), groupBy: 'pool' });
    expect(r.currency).toBe('EUR');
    expect(r.rows).toHaveLength(1);
    expect(r.rows[0]).toMatchObject({ key: 'crawl', instanceSeconds: 36_000, instances: 1 });
    expect(r.rows[0]?.cost).toEqual({ instances: 0.1, egress: 0.2, vendor: 5, ipv4: 0.05, total: 5.35 });
    expect(await store.poolUsage('crawl', day('2026-11-01').from, day('2026-11-01').to)).toEqual({ bytes: 3e9, cost: 5.35 });
    expect(await store.poolUsage('elsewhere', day('2026-11-01').from, day('2026-11-01').to)).toEqual({ bytes: 0, cost: 0 });
  });

  it('keys instance time and its cost by location or machine type, without traffic', async () => {
    reset({ prices: priceTableSchema.parse({ instanceHour: { gcp: { default: 0.02, 'e2-small': 0.01 } } }), nowMs: Date.parse('2026-11-05T00:00:00Z') });
    const store = await make();
    await store.addTraffic([traffic('2026-11-01T10:00:00.000Z', { up: 5, down: 7 })]);
    await store.instanceStarted(life('i1', '2026-11-01T00:00:00.000Z'));
    await store.instanceEnded('gcp', 'i1', '2026-11-01T10:00:00.000Z');
    await store.instanceStarted(life('i2', '2026-11-01T00:00:00.000Z', { machineType: 'e2-medium', location: 'us-east1-b' }));
    await store.instanceEnded('gcp', 'i2', '2026-11-01T05:00:00.000Z');
    const byType = await store.query({ ...day('2026-11-01'), groupBy: 'machineType' });
    expect(byType.rows.map((x) => [x.key, x.instanceSeconds, x.instances, x.cost.instances, x.bytesUp + x.bytesDown])).toEqual([
      ['gcp/e2-medium', 5 * 3600, 1, 0.1, 0],
      ['gcp/e2-small', 10 * 3600, 1, 0.1, 0],
    ]);
    const byLocation = await store.query({ ...day('2026-11-01'), groupBy: 'location' });
    expect(byLocation.rows.map((x) => [x.key, x.instanceSeconds])).toEqual([
      ['gcp/europe-west1-b', 10 * 3600],
      ['gcp/us-east1-b', 5 * 3600],
    ]);
    expect(byLocation.totals).toMatchObject({ bytesUp: 0, bytesDown: 0, instanceSeconds: 15 * 3600, instances: 2 });
  });

  it('splits instance seconds across days and the window, and runs open lives to now', async () => {
    reset({ nowMs: Date.parse('2026-11-03T06:00:00Z') });
    const store = await make();
    await store.instanceStarted(life('i1', '2026-11-01T22:00:00.000Z'));
    await store.instanceEnded('gcp', 'i1', '2026-11-02T01:00:00.000Z');
    await store.instanceStarted(life('i2', '2026-11-02T23:00:00.000Z', { pool: undefined, provider: 'kvm' }));
    const r = await store.query({ from: new Date('2026-11-01T23:00:00Z'), to: new Date('2026-11-04T00:00:00Z'), groupBy: 'provider' });
    expect(r.rows.map((x) => [x.day, x.key, x.instanceSeconds, x.instances])).toEqual([
      ['2026-11-01', 'gcp', 3600, 1],
      ['2026-11-02', 'gcp', 3600, 1],
      ['2026-11-02', 'kvm', 3600, 1],
      ['2026-11-03', 'kvm', 6 * 3600, 1],
    ]);
    expect(r.totals).toMatchObject({ instanceSeconds: 3600 * 9, instances: 2 });
    expect((await store.runningInstances()).map((l) => l.instance)).toEqual(['i2']);
  });

  it('records lives idempotently: repeated starts and ends, an end before its start, a reused name', async () => {
    reset({ nowMs: Date.parse('2026-11-02T00:00:00Z') });
    const store = await make();
    await store.instanceStarted(life('i1', '2026-11-01T01:00:00.000Z'));
    await store.instanceStarted(life('i1', '2026-11-01T01:30:00.000Z'));
    await store.instanceEnded('gcp', 'i1', '2026-11-01T02:00:00.000Z');
    await store.instanceEnded('gcp', 'i1', '2026-11-01T02:30:00.000Z');
    await store.instanceStarted(life('i1', '2026-11-01T01:00:00.000Z'));
    // The end arrives first: kept, and the start completes it.
    await store.instanceEnded('gcp', 'i2', '2026-11-01T05:00:00.000Z');
    let r = await store.query({ ...day('2026-11-01'), groupBy: 'pool' });
    expect(r.totals).toMatchObject({ instanceSeconds: 3600, instances: 1 });
    await store.instanceStarted(life('i2', '2026-11-01T04:00:00.000Z'));
    // The same name again after its life ended: a new life.
    await store.instanceStarted(life('i1', '2026-11-01T10:00:00.000Z'));
    await store.instanceEnded('gcp', 'i1', '2026-11-01T11:00:00.000Z');
    // A move: the same name deleted and created in one millisecond.
    await store.instanceStarted(life('i1', '2026-11-01T11:00:00.000Z', { location: 'elsewhere' }));
    await store.instanceEnded('gcp', 'i1', '2026-11-01T12:00:00.000Z');
    r = await store.query({ ...day('2026-11-01'), groupBy: 'pool' });
    expect(r.totals).toMatchObject({ instanceSeconds: 4 * 3600, instances: 4 });
    expect(await store.runningInstances()).toEqual([]);
  });

  it('refuses a window that is not one', async () => {
    reset();
    const store = await make();
    const at = new Date('2026-11-01T00:00:00Z');
    await expect(store.query({ from: at, to: at, groupBy: 'pool' })).rejects.toBeInstanceOf(UsageWindowError);
    await expect(store.query({ from: at, to: new Date(at.getTime() + 401 * 86_400_000), groupBy: 'pool' })).rejects.toThrow(/400 days/);
    await expect(store.poolUsage('crawl', new Date('x'), at)).rejects.toBeInstanceOf(UsageWindowError);
    await expect(store.instanceStarted(life('i1', 'yesterday'))).rejects.toThrow(new UsageRecordError('instance i1: startedAt: "yesterday" is not a time'));
    await expect(store.instanceEnded('gcp', 'i1', '')).rejects.toBeInstanceOf(UsageRecordError);
  });

  it('forgets ended lives past the retention, keeps open ones', async () => {
    reset({ nowMs: Date.parse('2026-11-01T00:00:00Z'), settings: { ...DEFAULT_USAGE_SETTINGS, retentionMs: 86_400_000 } });
    const store = await make();
    await store.instanceStarted(life('old', '2026-10-01T00:00:00.000Z'));
    await store.instanceEnded('gcp', 'old', '2026-10-02T00:00:00.000Z');
    await store.instanceStarted(life('open', '2026-10-01T00:00:00.000Z'));
    await store.instanceStarted(life('new', '2026-10-31T12:00:00.000Z'));
    const r = await store.query({ from: new Date('2026-09-30T00:00:00Z'), to: new Date('2026-11-01T00:00:00Z'), groupBy: 'pool' });
    expect(r.totals.instances).toBe(2);
  });
});

describe('usage store in Redis', () => {
  const make = useStores(
    redisStoreHarness((redis, prefix) => {
      made.prefix = prefix;
      return new RedisUsageStore(redis, prefix, options());
    }),
  );

  it('keeps every key under the prefix, each expiring after the retention', async () => {
    Object.assign(made, { nowMs: Date.now(), prices: undefined, settings: { ...DEFAULT_USAGE_SETTINGS, retentionMs: 10 * 86_400_000 } });
    const store = await make();
    const hourMs = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    const hour = new Date(hourMs).toISOString();
    await store.addTraffic([traffic(hour)]);
    const redis = new Redis(inject('redisUrl'));
    try {
      const prefix = made.prefix ?? '';
      const keys = (await redis.keys(`${prefix}:usage:*`)).sort();
      const k = new UsageKeys(prefix);
      const h = hour.slice(0, 13);
      expect(keys).toEqual([k.byDomain(h.slice(0, 10)), k.byDomain(h), k.byPool(h.slice(0, 10)), k.byPool(h), k.domains(h), k.traffic(h)].sort());
      expect(await redis.pexpiretime(k.traffic(h))).toBe(hourMs + 10 * 86_400_000);
      const dayEnd = hourMs - (hourMs % 86_400_000) + 86_400_000;
      expect(await redis.pexpiretime(k.byPool(h.slice(0, 10)))).toBe(dayEnd + 10 * 86_400_000);
      expect(await redis.hgetall(k.traffic(h))).toMatchObject({ 'p1\u001fcrawl\u001fgcp\u001fexample.com\u001fd': '1000' });
    } finally {
      await redis.quit();
    }
  });
});

describe('usage store in memory', () => {
  it('keeps what the collector wrote by hour, proxy, pool, provider and domain (past the bound: other)', async () => {
    const store = new MemoryUsageStore({ settings: { ...DEFAULT_USAGE_SETTINGS, maxDomainsPerPoolHour: 1 }, now: () => Date.parse('2026-11-01T12:00:00Z') });
    const hour = '2026-11-01T10:00:00.000Z';
    await store.addTraffic([traffic(hour), traffic(hour, { domain: 'b.org' }), traffic(hour, { domain: 'c.org' })]);
    expect(store.hourDetail(hour).map((r) => [r.proxy, r.pool, r.provider, r.domain, r.counts.requests])).toEqual([
      ['p1', 'crawl', 'gcp', 'example.com', 1],
      ['p1', 'crawl', 'gcp', 'other', 2],
    ]);
  });
});
