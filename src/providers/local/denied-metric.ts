import { Counter, type Registry } from 'prom-client';
import { asDenialStats, DENIAL_STATS_FILE } from './denial-stats.ts';
import { instanceDirs, readStats, StatsGrowth } from './stats-growth.ts';

/**
 * `proxy_operator_proxy_denied_total{provider,reason}` for local proxies: the worker's registry
 * reads every instance's `egress-denials.json` when scraped and adds what grew since it last
 * looked (stats-growth.ts: a new pid or start time counts from zero), so the counter never goes
 * down and covers proxies that outlive a worker.
 */
export const PROXY_DENIED_METRIC = 'proxy_operator_proxy_denied_total';

interface Source {
  provider: string;
  dataDir: string;
}

interface DeniedMetric {
  sources: Set<Source>;
  growth: StatsGrowth;
}

const metrics = new WeakMap<Registry, DeniedMetric>();

async function collectSource(counter: Counter<'provider' | 'reason'>, state: DeniedMetric, source: Source): Promise<void> {
  for (const { dir } of await instanceDirs(source.dataDir)) {
    const stats = await readStats(dir, DENIAL_STATS_FILE, asDenialStats);
    if (!stats) continue;
    for (const [reason, n] of Object.entries(state.growth.grow(dir, stats, stats.denied))) counter.inc({ provider: source.provider, reason }, n);
  }
}

/**
 * Makes `registry` export the denials of the local proxies under `dataDir` as `provider`'s.
 * Returns a function that stops it (the counts already exported stay).
 */
export function exportDenials(registry: Registry, provider: string, dataDir: string): () => void {
  let state = metrics.get(registry);
  if (!state) {
    const created: DeniedMetric = { sources: new Set(), growth: new StatsGrowth() };
    state = created;
    metrics.set(registry, created);
    new Counter({
      name: PROXY_DENIED_METRIC,
      help: 'Connections local proxies refused by their egress policy, by provider and reason (loopback, private, metadata, guarded-listener, …).',
      labelNames: ['provider', 'reason'],
      registers: [registry],
      async collect() {
        for (const source of created.sources) await collectSource(this, created, source);
      },
    });
  }
  const source: Source = { provider, dataDir };
  state.sources.add(source);
  const owner = state;
  return () => void owner.sources.delete(source);
}
