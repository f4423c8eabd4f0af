/*
 * The usage store in a process's memory: the same periods, domain bound, retention and life rules
 * as the Redis store, for pure tests and embedding. Each write is one synchronous step.
 */
import { instanceKey, lifeRecord, onEnd, onStart, storedLife, type LifeChange, type StoredLife } from './instance-lives.ts';
import { buildReport, poolUsageOf, type TrafficCell } from './usage-report.ts';
import { DEFAULT_USAGE_SETTINGS, type UsageQuery, type UsageReport, type UsageStore, type UsageStoreOptions } from './usage-store.ts';
import { addTraffic, OTHER_DOMAIN, type InstanceRecord, type PoolUsage, type TrafficRecord } from './usage-types.ts';
import { checkWindow, DAY_MS, recordHour, recordTimeMs, windowPeriods } from './usage-window.ts';

type Family = 'pool' | 'domain';

interface Bucket {
  expiresAtMs: number;
  /** `<pool or domain>\u001f<provider>` → counts. */
  cells: Map<string, TrafficCell>;
}

/** Runs `op` as one store call: an ended signal rejects it before anything is read or written. */
function call<R>(signal: AbortSignal | undefined, op: () => R): Promise<R> {
  return Promise.resolve().then(() => {
    signal?.throwIfAborted();
    return op();
  });
}

export class MemoryUsageStore implements UsageStore {
  readonly #settings;
  readonly #prices;
  readonly #now: () => number;
  /** `<family>:<period>` → bucket, the period a day (`YYYY-MM-DD`) or an hour (`YYYY-MM-DDTHH`). */
  readonly #buckets = new Map<string, Bucket>();
  /** Per hour, per pool: the domains kept. */
  readonly #domains = new Map<string, Map<string, Set<string>>>();
  /** Per hour: traffic by proxy, pool, provider and domain (what the collector wrote, whole). */
  readonly #detail = new Map<string, Map<string, TrafficRecord>>();
  readonly #lives = new Map<string, StoredLife>();
  /** Instance key → the id of its current life. */
  readonly #current = new Map<string, string>();
  #seq = 0;

  constructor(options: UsageStoreOptions = {}) {
    this.#settings = options.settings ?? DEFAULT_USAGE_SETTINGS;
    this.#prices = options.prices;
    this.#now = options.now ?? Date.now;
  }

  addTraffic(records: readonly TrafficRecord[], signal?: AbortSignal): Promise<void> {
    return call(signal, () => {
      this.#expire();
      for (const r of records) {
        const hour = recordHour(r.hour);
        if (hour === undefined) continue;
        const hourMs = Date.parse(`${hour}:00:00.000Z`);
        const pool = r.pool ?? '';
        const domain = this.#boundDomain(hour, pool, r.domain);
        const detailKey = [r.proxy, pool, r.provider, domain].join('\u001f');
        const detail = this.#detail.get(hour) ?? new Map<string, TrafficRecord>();
        this.#detail.set(hour, detail);
        const kept = detail.get(detailKey);
        if (kept) addTraffic(kept.counts, r.counts);
        else detail.set(detailKey, { ...r, domain, counts: { ...r.counts } });
        const day = hour.slice(0, 10);
        const retention = this.#settings.retentionMs;
        for (const [family, group] of [['pool', pool] as const, ['domain', domain] as const]) {
          this.#add(`${family}:${hour}`, hourMs + retention, day, group, r);
          this.#add(`${family}:${day}`, hourMs - (hourMs % DAY_MS) + DAY_MS + retention, day, group, r);
        }
      }
    });
  }

  #boundDomain(hour: string, pool: string, domain: string): string {
    if (domain === OTHER_DOMAIN) return domain;
    const byPool = this.#domains.get(hour) ?? new Map<string, Set<string>>();
    this.#domains.set(hour, byPool);
    const kept = byPool.get(pool) ?? new Set<string>();
    byPool.set(pool, kept);
    if (kept.has(domain)) return domain;
    if (kept.size >= this.#settings.maxDomainsPerPoolHour) return OTHER_DOMAIN;
    kept.add(domain);
    return domain;
  }

  #add(bucketKey: string, expiresAtMs: number, day: string, group: string, r: TrafficRecord): void {
    const bucket = this.#buckets.get(bucketKey) ?? { expiresAtMs, cells: new Map<string, TrafficCell>() };
    this.#buckets.set(bucketKey, bucket);
    const cellKey = `${group}\u001f${r.provider}`;
    const cell = bucket.cells.get(cellKey);
    if (cell) addTraffic(cell.counts, r.counts);
    else bucket.cells.set(cellKey, { day, group, provider: r.provider, counts: { ...r.counts } });
  }

  #expire(): void {
    const now = this.#now();
    for (const [key, bucket] of this.#buckets) if (bucket.expiresAtMs <= now) this.#buckets.delete(key);
    for (const hour of [...this.#detail.keys()]) {
      if (Date.parse(`${hour}:00:00.000Z`) + this.#settings.retentionMs <= now) {
        this.#detail.delete(hour);
        this.#domains.delete(hour);
      }
    }
    for (const [id, life] of this.#lives) {
      if (life.endMs !== undefined && life.endMs <= now - this.#settings.retentionMs) {
        this.#lives.delete(id);
        const key = instanceKey(life.provider, life.instance);
        if (this.#current.get(key) === id) this.#current.delete(key);
      }
    }
  }

  /** What the collector wrote for an hour, by proxy, pool, provider and domain (tests read it). */
  hourDetail(hour: string): TrafficRecord[] {
    return [...(this.#detail.get(hour.slice(0, 13))?.values() ?? [])].map((r) => ({ ...r, counts: { ...r.counts } }));
  }

  #apply(key: string, change: LifeChange): void {
    if (change.kind === 'none') return;
    const id = change.kind === 'update' ? (this.#current.get(key) ?? '') : `${key}#${++this.#seq}`;
    this.#lives.set(id, { ...change.life });
    this.#current.set(key, id);
  }

  #currentLife(key: string): StoredLife | undefined {
    const id = this.#current.get(key);
    return id === undefined ? undefined : this.#lives.get(id);
  }

  instanceStarted(record: InstanceRecord, signal?: AbortSignal): Promise<void> {
    return call(signal, () => {
      this.#expire();
      const key = instanceKey(record.provider, record.instance);
      this.#apply(key, onStart(this.#currentLife(key), storedLife(record)));
    });
  }

  instanceEnded(provider: string, instance: string, endedAt: string, signal?: AbortSignal): Promise<void> {
    return call(signal, () => {
      this.#expire();
      const key = instanceKey(provider, instance);
      this.#apply(key, onEnd(this.#currentLife(key), provider, instance, recordTimeMs(`instance ${instance}: endedAt`, endedAt)));
    });
  }

  #cells(family: Family, fromMs: number, toMs: number): TrafficCell[] {
    const { days, hours } = windowPeriods(fromMs, toMs);
    return [...days, ...hours].flatMap((period) =>
      [...(this.#buckets.get(`${family}:${period}`)?.cells.values() ?? [])].map((c) => ({ ...c, counts: { ...c.counts } })),
    );
  }

  #livesAfter(fromMs: number): StoredLife[] {
    return [...this.#lives.values()].filter((l) => l.endMs === undefined || l.endMs > fromMs).map((l) => ({ ...l }));
  }

  query(query: UsageQuery, signal?: AbortSignal): Promise<UsageReport> {
    return call(signal, () => {
      checkWindow(query.from, query.to);
      this.#expire();
      const fromMs = query.from.getTime();
      const cells = this.#cells(query.groupBy === 'domain' ? 'domain' : 'pool', fromMs, query.to.getTime());
      return buildReport(query, cells, this.#livesAfter(fromMs), this.#prices, this.#now());
    });
  }

  poolUsage(pool: string, from: Date, to: Date, signal?: AbortSignal): Promise<PoolUsage> {
    return call(signal, () => {
      checkWindow(from, to);
      this.#expire();
      return poolUsageOf(pool, from, to, this.#cells('pool', from.getTime(), to.getTime()), this.#livesAfter(from.getTime()), this.#prices, this.#now());
    });
  }

  runningInstances(signal?: AbortSignal): Promise<InstanceRecord[]> {
    return call(signal, () => {
      return [...this.#lives.values()].filter((l) => l.startMs !== undefined && l.endMs === undefined).flatMap((l) => lifeRecord(l) ?? []);
    });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
