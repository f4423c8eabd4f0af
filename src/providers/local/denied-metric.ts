import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Counter, type Registry } from 'prom-client';
import { asDenialStats, DENIAL_STATS_FILE, type DenialStats } from './denial-stats.ts';
import { instanceDir, instancesDir, readJson } from './instance-files.ts';

/**
 * `proxy_operator_proxy_denied_total{provider,reason}` for local proxies: the worker's registry
 * reads every instance's `egress-denials.json` when scraped and adds what grew since it last
 * looked (a new pid or start time counts from zero), so the counter never goes down and covers
 * proxies that outlive a worker.
 */
export const PROXY_DENIED_METRIC = 'proxy_operator_proxy_denied_total';

interface Source {
  provider: string;
  dataDir: string;
}

interface DeniedMetric {
  sources: Set<Source>;
  /** Per instance directory: the process it last saw and the counts it had already added. */
  seen: Map<string, DenialStats>;
}

const metrics = new WeakMap<Registry, DeniedMetric>();

async function collectSource(counter: Counter<'provider' | 'reason'>, state: DeniedMetric, source: Source): Promise<void> {
  let names: string[];
  try {
    names = (await readdir(instancesDir(source.dataDir), { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    return;
  }
  for (const name of names) {
    const dir = instanceDir(source.dataDir, name);
    const stats = asDenialStats(await readJson(join(dir, DENIAL_STATS_FILE)).catch(() => undefined));
    if (!stats) continue;
    const before = state.seen.get(dir);
    const same = before !== undefined && before.pid === stats.pid && before.startedAt === stats.startedAt;
    for (const [reason, n] of Object.entries(stats.denied)) {
      const delta = n - (same ? (before.denied[reason] ?? 0) : 0);
      if (delta > 0) counter.inc({ provider: source.provider, reason }, delta);
    }
    // Keep the highest count seen per reason, so a file read half-way through a restart never counts twice.
    const merged = same ? { ...stats, denied: { ...before.denied } } : { ...stats, denied: {} as Record<string, number> };
    for (const [reason, n] of Object.entries(stats.denied)) merged.denied[reason] = Math.max(n, merged.denied[reason] ?? 0);
    state.seen.set(dir, merged);
  }
}

/**
 * Makes `registry` export the denials of the local proxies under `dataDir` as `provider`'s.
 * Returns a function that stops it (the counts already exported stay).
 */
export function exportDenials(registry: Registry, provider: string, dataDir: string): () => void {
  let state = metrics.get(registry);
  if (!state) {
    const created: DeniedMetric = { sources: new Set(), seen: new Map() };
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
