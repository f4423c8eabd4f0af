import type { TrafficCounts } from '../model/traffic.ts';

export { addTraffic, emptyTraffic, OTHER_DOMAIN, type TrafficCounts } from '../model/traffic.ts';

/*
 * The shapes every part of usage accounting agrees on (docs/usage.md): the data plane counts
 * traffic, the worker's collector turns the counts into hourly records, the usage store keeps
 * them with the instances' lives, prices turn both into cost, budgets and autoscaling read them.
 * No I/O here.
 */

/** What one proxy carried to one destination domain (or `other`) within one hour. */
export interface TrafficRecord {
  /** The hour's start, `YYYY-MM-DDTHH:00:00.000Z`. */
  hour: string;
  proxy: string;
  /** The pool the proxy is a member of, if any. */
  pool?: string;
  provider: string;
  /** The destination's host name, lower case, or OTHER_DOMAIN. */
  domain: string;
  counts: TrafficCounts;
}

/** One instance's life, from the lifecycle's InstanceCreated and InstanceDeleted events. */
export interface InstanceRecord {
  /** The instance's provider-side name (unique within the provider). */
  instance: string;
  proxy: string;
  pool?: string;
  provider: string;
  /** Where it runs (a zone, a host, `local`). */
  location: string;
  /** What it runs on (a GCE machine type, a KVM size, `local`, `upstream`). */
  machineType: string;
  startedAt: string;
  endedAt?: string;
}

/**
 * How usage rows are keyed: by pool, provider or destination domain; or by where instances ran and
 * on what (`<provider>/<location>`, `<provider>/<machine type>`: instance time and its cost only,
 * since traffic is not kept by instance).
 */
export type UsageGroupBy = 'pool' | 'provider' | 'domain' | 'location' | 'machineType';

/** The start of the hour `at` falls in, as TrafficRecord.hour spells it. */
export function hourOf(at: Date): string {
  const t = new Date(at.getTime());
  t.setUTCMinutes(0, 0, 0);
  return t.toISOString();
}

/**
 * What budgets and autoscaling read of a pool's usage within a window [from, to): bytes both ways
 * and cost (in the price table's currency; 0 without prices).
 */
export interface PoolUsage {
  bytes: number;
  cost: number;
}

/** The port budgets read (src/usage/usage-store.ts implements it over Redis and in memory). */
export interface PoolUsageReader {
  poolUsage(pool: string, from: Date, to: Date, signal?: AbortSignal): Promise<PoolUsage>;
}
