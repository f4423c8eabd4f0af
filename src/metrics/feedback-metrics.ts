import { Counter, type Registry } from 'prom-client';

/** What picks and feedback count (the shapes src/pools asks for: PickCounter and FeedbackCounter). */
export interface FeedbackMetrics {
  picked(pool: string, result: string): void;
  reported(pool: string, outcome: string): void;
  replacementRequested(pool: string): void;
}

const byRegistry = new WeakMap<Registry, FeedbackMetrics>();

/**
 * `proxy_operator_pool_picks_total{pool,result}`, `proxy_operator_pool_feedback_total{pool,outcome}`
 * (pool `""` for a proxy outside any pool) and `proxy_operator_pool_ban_replacements_total{pool}`,
 * counted in the API process that served them. Pool labels come only from pools that exist.
 */
export function createFeedbackMetrics(registry: Registry): FeedbackMetrics {
  const existing = byRegistry.get(registry);
  if (existing) return existing;
  const picks = new Counter({
    name: 'proxy_operator_pool_picks_total',
    help: 'Picks by pool and result: kept (the session kept its member), new, moved (the session changed member), none-ready, all-blocked, none-in-tier, budget-exhausted.',
    labelNames: ['pool', 'result'],
    registers: [registry],
  });
  const feedback = new Counter({
    name: 'proxy_operator_pool_feedback_total',
    help: 'Feedback reports by pool ("" for a proxy outside any pool) and outcome (blocked, captcha, ok).',
    labelNames: ['pool', 'outcome'],
    registers: [registry],
  });
  const replacements = new Counter({
    name: 'proxy_operator_pool_ban_replacements_total',
    help: 'Members whose replacement was asked of their pool because they were blocked on too many domains.',
    labelNames: ['pool'],
    registers: [registry],
  });
  const metrics: FeedbackMetrics = {
    picked: (pool, result) => picks.inc({ pool, result }),
    reported: (pool, outcome) => feedback.inc({ pool, outcome }),
    replacementRequested: (pool) => replacements.inc({ pool }),
  };
  byRegistry.set(registry, metrics);
  return metrics;
}
