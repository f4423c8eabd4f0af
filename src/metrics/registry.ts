import { Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The process's own registry (never prom-client's global one), with Node's process metrics under
 * their conventional names (`process_*`, `nodejs_*`), so the standard Node.js dashboards work;
 * the project's own metrics are named `proxy_operator_*`.
 */
export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}
