import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Counter, type Registry } from 'prom-client';
import { asDenialStats, DENIAL_STATS_FILE } from '../local/denial-stats.ts';
import { asIntent, instanceDir, instancesDir, INTENT_FILE, readJson } from '../local/instance-files.ts';
import { asUpstreamStats, UPSTREAM_STATS_FILE } from '../local/upstream-stats.ts';

/**
 * Per upstream (one front per endpoint, so per endpoint's Proxy), read from the fronts' files
 * when scraped, the way denied-metric.ts reads the local proxies' denials: what grew since the last
 * look is added (a front restarted counts from zero), so the counters never go down.
 *
 * - `proxy_operator_upstream_failures_total{provider,proxy,kind}`: requests and tunnels the upstream failed
 * - `proxy_operator_upstream_bytes_total{provider,proxy,direction}`: bytes sent to and received from it
 * - `proxy_operator_upstream_denied_total{provider,proxy,reason}`: what the egress policy refused before it
 */
export const UPSTREAM_FAILURES_METRIC = 'proxy_operator_upstream_failures_total';
export const UPSTREAM_BYTES_METRIC = 'proxy_operator_upstream_bytes_total';
export const UPSTREAM_DENIED_METRIC = 'proxy_operator_upstream_denied_total';

interface Seen {
  identity: string;
  counts: Record<string, number>;
}

interface State {
  sources: Map<string, string>;
  seen: Map<string, Seen>;
  failures: Counter<'provider' | 'proxy' | 'kind'>;
  bytes: Counter<'provider' | 'proxy' | 'direction'>;
  denied: Counter<'provider' | 'proxy' | 'reason'>;
}

const states = new WeakMap<Registry, State>();

/** Adds to `counter` what each count grew by since `key` was last seen (all of it after a restart). */
function addGrowth(state: State, key: string, identity: string, counts: Record<string, number>, inc: (name: string, delta: number) => void): void {
  const before = state.seen.get(key);
  const same = before?.identity === identity;
  const merged: Record<string, number> = same ? { ...before.counts } : {};
  for (const [name, n] of Object.entries(counts)) {
    const delta = n - (same ? (before.counts[name] ?? 0) : 0);
    if (delta > 0) inc(name, delta);
    merged[name] = Math.max(n, merged[name] ?? 0);
  }
  state.seen.set(key, { identity, counts: merged });
}

async function collect(state: State): Promise<void> {
  for (const [provider, dataDir] of state.sources) {
    const names = await readdir(instancesDir(dataDir), { withFileTypes: true }).then(
      (entries) => entries.filter((e) => e.isDirectory()).map((e) => e.name),
      () => [] as string[],
    );
    for (const name of names) {
      const dir = instanceDir(dataDir, name);
      const proxy = asIntent(await readJson(join(dir, INTENT_FILE)).catch(() => undefined))?.owner.proxy;
      if (proxy === undefined) continue;
      const stats = asUpstreamStats(await readJson(join(dir, UPSTREAM_STATS_FILE)).catch(() => undefined));
      if (stats) {
        const identity = `${stats.pid}:${stats.startedAt}`;
        addGrowth(state, `${dir}:failures`, identity, stats.failures, (kind, n) => state.failures.inc({ provider, proxy, kind }, n));
        addGrowth(state, `${dir}:bytes`, identity, { sent: stats.sentBytes, received: stats.receivedBytes }, (direction, n) =>
          state.bytes.inc({ provider, proxy, direction }, n),
        );
      }
      const denials = asDenialStats(await readJson(join(dir, DENIAL_STATS_FILE)).catch(() => undefined));
      if (denials) {
        addGrowth(state, `${dir}:denied`, `${denials.pid}:${denials.startedAt}`, denials.denied, (reason, n) =>
          state.denied.inc({ provider, proxy, reason }, n),
        );
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
      seen: new Map(),
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
