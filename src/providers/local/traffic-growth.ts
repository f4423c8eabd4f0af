import { join } from 'node:path';
import { emptyTraffic, type InstanceTraffic, type TrafficCounts } from '../../model/traffic.ts';
import { asIntent, INTENT_FILE, readJson } from './instance-files.ts';
import { instanceDirs, readStats, type StatsGrowth } from './stats-growth.ts';
import { asTrafficStats, TRAFFIC_STATS_FILE } from './traffic-stats.ts';

/*
 * What the proxies under a data directory carried since a reader last looked: every instance's
 * `traffic-stats.json` (traffic-stats.ts) read through the reader's own StatsGrowth, so a proxy
 * restarted counts from zero and nothing is read twice. The traffic metric and the traffic
 * collector (src/providers/traffic-sources.ts) each keep their own.
 */

const FIELDS = ['bytesUp', 'bytesDown', 'requests', 'tunnels'] as const;

/** `{domain: counts}` as one flat record (`<field> <domain>`: a field has no space, so the first one splits them). */
export function flattenTraffic(domains: Readonly<Record<string, TrafficCounts>>): Record<string, number> {
  const flat: Record<string, number> = {};
  for (const [domain, counts] of Object.entries(domains)) for (const field of FIELDS) flat[`${field} ${domain}`] = counts[field];
  return flat;
}

export function unflattenTraffic(flat: Readonly<Record<string, number>>): Map<string, TrafficCounts> {
  const domains = new Map<string, TrafficCounts>();
  for (const [key, n] of Object.entries(flat)) {
    const space = key.indexOf(' ');
    const field = key.slice(0, space) as (typeof FIELDS)[number];
    const domain = key.slice(space + 1);
    let counts = domains.get(domain);
    if (!counts) domains.set(domain, (counts = emptyTraffic()));
    counts[field] += n;
  }
  return domains;
}

/** The StatsGrowth key of an instance directory's traffic. */
export function trafficKey(dir: string): string {
  return `${dir}:traffic`;
}

/**
 * The traffic of every instance under `dataDir` that grew since `growth` last saw it. `before`, when
 * given, runs for each instance directory before its file is compared (the collector seeds its
 * baseline there).
 */
export async function readTrafficGrowth(growth: StatsGrowth, dataDir: string, before?: (dir: string) => Promise<void>): Promise<InstanceTraffic[]> {
  const grown: InstanceTraffic[] = [];
  for (const { name, dir } of await instanceDirs(dataDir)) {
    const stats = await readStats(dir, TRAFFIC_STATS_FILE, asTrafficStats);
    if (!stats) continue;
    await before?.(dir);
    const domains = unflattenTraffic(growth.grow(trafficKey(dir), stats, flattenTraffic(stats.domains)));
    if (domains.size === 0) continue;
    const proxy = asIntent(await readJson(join(dir, INTENT_FILE)).catch(() => undefined))?.owner.proxy;
    grown.push({ instance: name, proxy, domains });
  }
  return grown;
}
