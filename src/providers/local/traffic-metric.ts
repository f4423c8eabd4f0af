import { Counter, type Registry } from 'prom-client';
import type { ProxyResolver } from '../../model/traffic.ts';
import { StatsGrowth } from './stats-growth.ts';
import { readTrafficGrowth } from './traffic-growth.ts';

/**
 * The traffic of the proxies of local-type providers (local, upstream), read from their
 * `traffic-stats.json` files when scraped (traffic-growth.ts: what grew since the last look is
 * added, a proxy restarted counts from zero), so the counters never go down and cover proxies that
 * outlive a worker. Labelled by provider and pool only: proxies and destination domains would make
 * a series each, so they go to the usage store (the traffic collector) instead.
 *
 * - `proxy_operator_proxy_traffic_bytes_total{provider,pool,direction="up"|"down"}`
 * - `proxy_operator_proxy_traffic_total{provider,pool,kind="request"|"tunnel"}`
 *
 * `pool` is the proxy's `egress-proxies.io/pool` label as the resolver finds it ('' for none, or
 * when no resolver is given).
 */
export const PROXY_TRAFFIC_BYTES_METRIC = 'proxy_operator_proxy_traffic_bytes_total';
export const PROXY_TRAFFIC_METRIC = 'proxy_operator_proxy_traffic_total';

interface Source {
  dataDir: string;
  resolve: ProxyResolver | undefined;
}

interface TrafficMetric {
  sources: Map<string, Source>;
  growth: StatsGrowth;
  bytes: Counter<'provider' | 'pool' | 'direction'>;
  carried: Counter<'provider' | 'pool' | 'kind'>;
}

const registries = new WeakMap<Registry, TrafficMetric>();

async function collectTraffic(metric: TrafficMetric): Promise<void> {
  for (const [provider, { dataDir, resolve }] of metric.sources) {
    for (const grown of await readTrafficGrowth(metric.growth, dataDir)) {
      const pool = (await resolve?.(grown.instance))?.pool ?? '';
      for (const counts of grown.domains.values()) {
        if (counts.bytesUp > 0) metric.bytes.inc({ provider, pool, direction: 'up' }, counts.bytesUp);
        if (counts.bytesDown > 0) metric.bytes.inc({ provider, pool, direction: 'down' }, counts.bytesDown);
        if (counts.requests > 0) metric.carried.inc({ provider, pool, kind: 'request' }, counts.requests);
        if (counts.tunnels > 0) metric.carried.inc({ provider, pool, kind: 'tunnel' }, counts.tunnels);
      }
    }
  }
}

function trafficMetric(registry: Registry): TrafficMetric {
  const existing = registries.get(registry);
  if (existing) return existing;
  // One look at the files per scrape, shared by both counters (each waits for it before it is read).
  let looking: Promise<void> | undefined;
  const look = (): Promise<void> =>
    (looking ??= collectTraffic(metric).finally(() => {
      looking = undefined;
    }));
  const metric: TrafficMetric = {
    sources: new Map(),
    growth: new StatsGrowth(),
    bytes: new Counter({
      name: PROXY_TRAFFIC_BYTES_METRIC,
      help: 'Bytes local-type proxies carried to destinations (up) and back (down), by provider and pool (docs/usage.md#traffic).',
      labelNames: ['provider', 'pool', 'direction'],
      registers: [registry],
      collect: look,
    }),
    carried: new Counter({
      name: PROXY_TRAFFIC_METRIC,
      help: 'Plain HTTP requests and tunnels (CONNECT, SOCKS5) local-type proxies carried, by provider and pool.',
      labelNames: ['provider', 'pool', 'kind'],
      registers: [registry],
      collect: look,
    }),
  };
  registries.set(registry, metric);
  return metric;
}

/**
 * Makes `registry` export the traffic of the proxies under `dataDir` as `provider`'s, their pools
 * found by `resolve`. Returns the function that stops it (the counts already exported stay).
 */
export function exportTraffic(registry: Registry, provider: string, dataDir: string, resolve?: ProxyResolver): () => void {
  const metric = trafficMetric(registry);
  const source: Source = { dataDir, resolve };
  metric.sources.set(provider, source);
  return () => {
    if (metric.sources.get(provider) === source) metric.sources.delete(provider);
  };
}
