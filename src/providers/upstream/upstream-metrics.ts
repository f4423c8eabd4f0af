import { join } from 'node:path';
import { Counter, type Registry } from 'prom-client';
import { asDenialStats, DENIAL_STATS_FILE } from '../local/denial-stats.ts';
import { asIntent, INTENT_FILE, readJson } from '../local/instance-files.ts';
import { instanceDirs, readStats, StatsGrowth } from '../local/stats-growth.ts';
import { asUpstreamStats, UPSTREAM_STATS_FILE } from '../local/upstream-stats.ts';

/**
 * Per upstream (one front per endpoint, so per endpoint's Proxy), read from the fronts' files
 * when scraped, the way denied-metric.ts reads the local proxies' denials (stats-growth.ts: what
 * grew since the last look is added, a front restarted counts from zero), so the counters never go down.
 *
 * - `proxy_operator_upstream_failures_total{provider,proxy,kind}`: requests and tunnels the upstream failed
 * - `proxy_operator_upstream_bytes_total{provider,proxy,direction}`: bytes sent to and received from it
 * - `proxy_operator_upstream_denied_total{provider,proxy,reason}`: what the egress policy refused before it
 */
export const UPSTREAM_FAILURES_METRIC = 'proxy_operator_upstream_failures_total';
export const UPSTREAM_BYTES_METRIC = 'proxy_operator_upstream_bytes_total';
export const UPSTREAM_DENIED_METRIC = 'proxy_operator_upstream_denied_total';

interface State {
  sources: Map<string, string>;
  growth: StatsGrowth;
  failures: Counter<'provider' | 'proxy' | 'kind'>;
  bytes: Counter<'provider' | 'proxy' | 'direction'>;
  denied: Counter<'provider' | 'proxy' | 'reason'>;
}

const states = new WeakMap<Registry, State>();

async function collect(state: State): Promise<void> {
  for (const [provider, dataDir] of state.sources) {
    for (const { dir } of await instanceDirs(dataDir)) {
      const proxy = asIntent(await readJson(join(dir, INTENT_FILE)).catch(() => undefined))?.owner.proxy;
      if (proxy === undefined) continue;
      const stats = await readStats(dir, UPSTREAM_STATS_FILE, asUpstreamStats);
      if (stats) {
        for (const [kind, n] of Object.entries(state.growth.grow(`${dir}:failures`, stats, stats.failures))) state.failures.inc({ provider, proxy, kind }, n);
        const bytes = state.growth.grow(`${dir}:bytes`, stats, { sent: stats.sentBytes, received: stats.receivedBytes });
        for (const [direction, n] of Object.entries(bytes)) state.bytes.inc({ provider, proxy, direction }, n);
      }
      const denials = await readStats(dir, DENIAL_STATS_FILE, asDenialStats);
      if (denials) {
        for (const [reason, n] of Object.entries(state.growth.grow(`${dir}:denied`, denials, denials.denied))) state.denied.inc({ provider, proxy, reason }, n);
      }
    }
  }
}

/** Makes `registry` export the per-upstream counts of the fronts under `dataDir` as `provider`'s. Returns the function that stops it. */
export function exportUpstreamMetrics(registry: Registry, provider: string, dataDir: string): () => void {
  let state = states.get(registry);
  if (!state) {
    const holder: { state?: State } = {};
    // One look at the files per scrape, shared by the three counters (each waits for it before it is read).
    let pending: Promise<void> | undefined;
    const onScrape = (): Promise<void> =>
      (pending ??= (holder.state ? collect(holder.state) : Promise.resolve()).finally(() => {
        pending = undefined;
      }));
    const created: State = {
      sources: new Map(),
      growth: new StatsGrowth(),
      failures: new Counter({
        name: UPSTREAM_FAILURES_METRIC,
        help: 'Requests and tunnels an upstream provider’s endpoint failed, by provider, proxy and kind (upstream-auth, refused, timeout, …).',
        labelNames: ['provider', 'proxy', 'kind'],
        registers: [registry],
        collect: onScrape,
      }),
      bytes: new Counter({
        name: UPSTREAM_BYTES_METRIC,
        help: 'Bytes the fronts of an upstream provider sent to and received from their endpoint, by provider, proxy and direction.',
        labelNames: ['provider', 'proxy', 'direction'],
        registers: [registry],
        collect: onScrape,
      }),
      denied: new Counter({
        name: UPSTREAM_DENIED_METRIC,
        help: 'Requests the egress policy refused at an upstream provider’s fronts, by provider, proxy and reason.',
        labelNames: ['provider', 'proxy', 'reason'],
        registers: [registry],
        collect: onScrape,
      }),
    };
    holder.state = created;
    state = created;
    states.set(registry, created);
  }
  state.sources.set(provider, dataDir);
  const owner = state;
  return () => void owner.sources.delete(provider);
}
