/*
 * The usage store in Redis (keys in usage-scripts.ts, all under the fleet's hash-tagged prefix):
 * traffic in hashes per hour and per day, written by one script per call; lives in one hash with
 * an index by end time. A query reads the day and edge-hour hashes its window needs (at most 447,
 * in one pipelined round trip) and the lives that ended after its start, never the keyspace.
 */
import type { RedisClient } from '../redis/connections.ts';
import { instanceKey, lifeId, lifeRecord, storedLife, type StoredLife } from './instance-lives.ts';
import { buildReport, groupsTraffic, poolUsageOf, type TrafficCell } from './usage-report.ts';
import { addTrafficScript, INSTANCE_ENDED, INSTANCE_STARTED, LIVES_FROM, UsageKeys } from './usage-scripts.ts';
import { DEFAULT_USAGE_SETTINGS, type UsageQuery, type UsageReport, type UsageSettings, type UsageStore, type UsageStoreOptions } from './usage-store.ts';
import { emptyTraffic, type InstanceRecord, type PoolUsage, type TrafficCounts, type TrafficRecord } from './usage-types.ts';
import { checkWindow, DAY_MS, recordHour, recordTimeMs, windowPeriods } from './usage-window.ts';
import type { PriceTable } from './prices.ts';

const SEP = '\u001f';
const METRIC_FIELDS: Record<string, keyof TrafficCounts> = { u: 'bytesUp', d: 'bytesDown', r: 'requests', t: 'tunnels' };

/** A count as the script's HINCRBY takes it: a non-negative integer in decimal. */
function count(n: number): string {
  return String(Math.max(0, Math.trunc(Number.isFinite(n) ? n : 0)));
}

/** A name as a field part: the separator cannot occur in one. */
function part(name: string): string {
  return name.split(SEP).join('');
}

function parseLife(text: string): StoredLife | undefined {
  try {
    const v = JSON.parse(text) as StoredLife;
    return typeof v.instance === 'string' && typeof v.provider === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}

export class RedisUsageStore implements UsageStore {
  readonly #keys: UsageKeys;
  readonly #settings: UsageSettings;
  readonly #prices: PriceTable | undefined;
  readonly #now: () => number;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    options: UsageStoreOptions = {},
  ) {
    this.#keys = new UsageKeys(prefix);
    this.#settings = options.settings ?? DEFAULT_USAGE_SETTINGS;
    this.#prices = options.prices;
    this.#now = options.now ?? Date.now;
  }

  async addTraffic(records: readonly TrafficRecord[], signal?: AbortSignal): Promise<void> {
    const hours: string[] = [];
    const index = new Map<string, number>();
    const recordArgs: string[] = [];
    for (const r of records) {
      const hour = recordHour(r.hour);
      if (hour === undefined) continue;
      let i = index.get(hour);
      if (i === undefined) index.set(hour, (i = hours.push(hour)));
      const c = r.counts;
      recordArgs.push(
        String(i),
        part(r.proxy),
        part(r.pool ?? ''),
        part(r.provider),
        part(r.domain),
        count(c.bytesUp),
        count(c.bytesDown),
        count(c.requests),
        count(c.tunnels),
      );
    }
    if (hours.length === 0) return;
    const keys = hours.flatMap((h) => {
      const day = h.slice(0, 10);
      return [this.#keys.traffic(h), this.#keys.domains(h), this.#keys.byPool(h), this.#keys.byPool(day), this.#keys.byDomain(h), this.#keys.byDomain(day)];
    });
    const retention = this.#settings.retentionMs;
    const expiries = hours.flatMap((h) => {
      const hourMs = Date.parse(`${h}:00:00.000Z`);
      return [String(hourMs + retention), String(hourMs - (hourMs % DAY_MS) + DAY_MS + retention)];
    });
    await addTrafficScript(hours.length).run(this.redis, keys, [this.#settings.maxDomainsPerPoolHour, hours.length, ...expiries, ...recordArgs], signal);
  }

  #lifeKeys(): string[] {
    return [this.#keys.lives, this.#keys.current, this.#keys.ends];
  }

  #cutoff(): string {
    return String(this.#now() - this.#settings.retentionMs);
  }

  async instanceStarted(record: InstanceRecord, signal?: AbortSignal): Promise<void> {
    const life = storedLife(record);
    delete life.endMs;
    const key = instanceKey(record.provider, record.instance);
    await INSTANCE_STARTED.run(this.redis, this.#lifeKeys(), [this.#cutoff(), key, JSON.stringify(life), life.startMs ?? 0, lifeId(life)], signal);
  }

  async instanceEnded(provider: string, instance: string, endedAt: string, signal?: AbortSignal): Promise<void> {
    const endMs = recordTimeMs(`instance ${instance}: endedAt`, endedAt);
    const pending: StoredLife = { instance, provider, endMs };
    const key = instanceKey(provider, instance);
    await INSTANCE_ENDED.run(this.redis, this.#lifeKeys(), [this.#cutoff(), key, endMs, JSON.stringify(pending), lifeId(pending)], signal);
  }

  async #lives(min: string, signal?: AbortSignal): Promise<StoredLife[]> {
    const texts = (await LIVES_FROM.run(this.redis, [this.#keys.lives, this.#keys.ends], [min], signal)) as string[];
    return texts.flatMap((t) => parseLife(t) ?? []);
  }

  async #cells(family: 'pool' | 'domain', fromMs: number, toMs: number, signal?: AbortSignal): Promise<TrafficCell[]> {
    const { days, hours } = windowPeriods(fromMs, toMs);
    const periods = [...days, ...hours];
    const pipeline = this.redis.pipeline();
    for (const p of periods) pipeline.hgetall(family === 'pool' ? this.#keys.byPool(p) : this.#keys.byDomain(p));
    signal?.throwIfAborted();
    const replies = (await pipeline.exec()) ?? [];
    const cells: TrafficCell[] = [];
    replies.forEach(([err, value], i) => {
      if (err) throw err;
      const day = (periods[i] ?? '').slice(0, 10);
      const byGroup = new Map<string, TrafficCell>();
      for (const [field, text] of Object.entries(value as Record<string, string>)) {
        const [group = '', provider = '', metric = ''] = field.split(SEP);
        const name = METRIC_FIELDS[metric];
        if (name === undefined) continue;
        const id = `${group}${SEP}${provider}`;
        let cell = byGroup.get(id);
        if (!cell) byGroup.set(id, (cell = { day, group, provider, counts: emptyTraffic() }));
        cell.counts[name] += Number(text);
      }
      cells.push(...byGroup.values());
    });
    return cells;
  }

  async query(query: UsageQuery, signal?: AbortSignal): Promise<UsageReport> {
    checkWindow(query.from, query.to);
    const fromMs = query.from.getTime();
    const family = query.groupBy === 'domain' ? 'domain' : 'pool';
    const [cells, lives] = await Promise.all([
      groupsTraffic(query.groupBy) ? this.#cells(family, fromMs, query.to.getTime(), signal) : Promise.resolve([]),
      query.groupBy === 'domain' ? Promise.resolve([]) : this.#lives(`(${fromMs}`, signal),
    ]);
    return buildReport(query, cells, lives, this.#prices, this.#now());
  }

  async poolUsage(pool: string, from: Date, to: Date, signal?: AbortSignal): Promise<PoolUsage> {
    checkWindow(from, to);
    const [cells, lives] = await Promise.all([this.#cells('pool', from.getTime(), to.getTime(), signal), this.#lives(`(${from.getTime()}`, signal)]);
    return poolUsageOf(pool, from, to, cells, lives, this.#prices, this.#now());
  }

  async runningInstances(signal?: AbortSignal): Promise<InstanceRecord[]> {
    return (await this.#lives('+inf', signal)).flatMap((l) => (l.endMs === undefined ? (lifeRecord(l) ?? []) : []));
  }

  /** The connection belongs to the caller; nothing is in flight between calls. */
  async close(): Promise<void> {}
}
