/*
 * The usage store (docs/usage.md#instances-prices-and-the-usage-api): traffic by the hour and
 * instance lives, read back as rows per day and pool, provider or domain with their cost. A port,
 * like the other stores: RedisUsageStore keeps it under the fleet's hash-tagged prefix,
 * MemoryUsageStore in a process's memory; test/usage/usage-store.test.ts holds both to one suite.
 */
import type { UsageSettings } from '../config/usage-config.ts';
import type { CostBreakdown, PriceTable } from './prices.ts';
import type { InstanceRecord, PoolUsageReader, TrafficRecord, UsageGroupBy } from './usage-types.ts';

export const USAGE_GROUP_BY = ['pool', 'provider', 'domain', 'location', 'machineType'] as const satisfies readonly UsageGroupBy[];

/** The row key of traffic and instances of proxies in no pool, when grouping by pool. */
export const NO_POOL = '-';

export interface UsageQuery {
  from: Date;
  to: Date;
  groupBy: UsageGroupBy;
}

/** One day's usage of one pool, provider or domain. */
export interface UsageRow {
  /** The UTC day, `YYYY-MM-DD`. */
  day: string;
  /** The pool (NO_POOL for none), provider or domain (OTHER_DOMAIN past the bound). */
  key: string;
  bytesUp: number;
  bytesDown: number;
  requests: number;
  tunnels: number;
  /** Seconds of instance life within the window and the day (0 by domain: instances serve every domain). */
  instanceSeconds: number;
  /** Instances alive at some time of the window and the day. */
  instances: number;
  cost: CostBreakdown;
}

export type UsageTotals = Omit<UsageRow, 'day' | 'key'>;

export interface UsageReport {
  from: string;
  to: string;
  groupBy: UsageGroupBy;
  /** The price table's currency; null without one (every cost is then 0). */
  currency: string | null;
  rows: UsageRow[];
  totals: UsageTotals;
}

export { DEFAULT_USAGE_SETTINGS, type UsageSettings } from '../config/usage-config.ts';

/** What every usage store is built with besides its storage. */
export interface UsageStoreOptions {
  settings?: UsageSettings;
  prices?: PriceTable | undefined;
  /** The clock open lives run to (tests set it). */
  now?: () => number;
}

/** Where the collector's traffic records go. */
export interface TrafficSink {
  /** Adds the records to their hourly buckets: one write whatever their number. */
  addTraffic(records: readonly TrafficRecord[], signal?: AbortSignal): Promise<void>;
}

/** Where the lifecycle's events record instance lives (idempotent: see instance-lives.ts). */
export interface InstanceLifeRecorder {
  instanceStarted(record: InstanceRecord, signal?: AbortSignal): Promise<void>;
  instanceEnded(provider: string, instance: string, endedAt: string, signal?: AbortSignal): Promise<void>;
}

export interface UsageStore extends TrafficSink, InstanceLifeRecorder, PoolUsageReader {
  /** Rows per day and key with their cost; rejects a window with UsageWindowError. */
  query(query: UsageQuery, signal?: AbortSignal): Promise<UsageReport>;
  /** The lives not ended (for the running-instances gauge). */
  runningInstances(signal?: AbortSignal): Promise<InstanceRecord[]>;
  close(): Promise<void>;
}
