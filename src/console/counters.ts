import type { Registry } from 'prom-client';

/** The totals the console draws as small time series (it keeps the history; the process keeps only totals). */
export interface ConsoleCounters {
  /** When they were read (ms since the epoch). */
  at: number;
  /** Picks that handed out a member (kept, new, moved). */
  picks: number;
  /** Picks refused: no member ready, or every member blocked for the domain. */
  denials: number;
  /** Ban reports (blocked or captcha). */
  bans: number;
  /** Readiness probes through proxies that failed. */
  probeFailures: number;
}

const DENIED_PICKS = new Set(['none-ready', 'all-blocked', 'none-in-tier']);

/** The sum of a counter's samples that `keep` accepts by their labels; 0 where the counter is not registered. */
async function sum(registry: Registry, name: string, keep: (labels: Record<string, string | number | undefined>) => boolean): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  return values.filter((v) => keep(v.labels)).reduce((total, v) => total + v.value, 0);
}

/** Reads this API process's counters of picks, pick denials, ban reports and failed probes. */
export async function readCounters(registry: Registry, now: () => number = Date.now): Promise<ConsoleCounters> {
  const [picks, denials, bans, probeFailures] = await Promise.all([
    sum(registry, 'proxy_operator_pool_picks_total', (l) => !DENIED_PICKS.has(String(l.result))),
    sum(registry, 'proxy_operator_pool_picks_total', (l) => DENIED_PICKS.has(String(l.result))),
    sum(registry, 'proxy_operator_pool_feedback_total', (l) => l.outcome === 'blocked' || l.outcome === 'captcha'),
    sum(registry, 'proxy_operator_readiness_probes_total', (l) => l.result !== 'ok'),
  ]);
  return { at: now(), picks, denials, bans, probeFailures };
}
