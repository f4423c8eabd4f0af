import { Registry, collectDefaultMetrics } from 'prom-client';

export const METRIC_PREFIX = 'proxy_operator_';

/** The process's own registry (never prom-client's global one), with Node's process metrics. */
export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });
  return registry;
}
