import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { EvictionCause } from '../proxies/readiness-contract.ts';
import { PROXY_PHASES } from '../model/proxy-resource.ts';
import type { ProxyReader } from '../store/proxy-store.ts';

/** `proxy_operator_proxies{provider,phase}`, counted from the store at scrape time (every phase reported, zeros included). */
export function registerProxyGauge(registry: Registry, proxies: ProxyReader, providers: readonly string[]): void {
  new Gauge({
    name: 'proxy_operator_proxies',
    help: 'Proxies by provider and phase.',
    labelNames: ['provider', 'phase'],
    registers: [registry],
    async collect() {
      const counts = new Map<string, number>();
      for (const p of await proxies.list()) counts.set(`${p.spec.provider}\0${p.status.phase}`, (counts.get(`${p.spec.provider}\0${p.status.phase}`) ?? 0) + 1);
      this.reset();
      for (const provider of providers) for (const phase of PROXY_PHASES) this.set({ provider, phase }, counts.get(`${provider}\0${phase}`) ?? 0);
    },
  });
}

export interface ReconcileMetrics {
  outcome(provider: string, outcome: string): void;
  /** One readiness probe (by reconcile or the probe loop) and how long it took. */
  probe(provider: string, ok: boolean, durationSeconds?: number): void;
  /** A Ready proxy left discovery; `readySeconds`, how long it had been Ready. */
  evicted(provider: string, cause: EvictionCause, readySeconds: number | undefined): void;
  replaced(provider: string): void;
}

const PROBE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4];
const READY_BUCKETS = [1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600];

/**
 * Reconcile outcomes and readiness events, counted in the worker that runs them. One set per
 * registry: a process that asks twice (the probe loop and reconcile) gets the same counters.
 */
const byRegistry = new WeakMap<Registry, ReconcileMetrics>();

export function createReconcileMetrics(registry: Registry): ReconcileMetrics {
  const existing = byRegistry.get(registry);
  if (existing) return existing;
  const outcomes = new Counter({
    name: 'proxy_operator_reconciles_total',
    help: 'Reconciles by provider and outcome (ready, failed, deleted, retry-later, gone).',
    labelNames: ['provider', 'outcome'],
    registers: [registry],
  });
  const probes = new Counter({
    name: 'proxy_operator_readiness_probes_total',
    help: 'Readiness probes through proxies, by provider and result.',
    labelNames: ['provider', 'result'],
    registers: [registry],
  });
  const probeSeconds = new Histogram({
    name: 'proxy_operator_readiness_probe_duration_seconds',
    help: 'Readiness probe latency (TCP connect and the request through the proxy), by provider and result.',
    labelNames: ['provider', 'result'],
    buckets: PROBE_BUCKETS,
    registers: [registry],
  });
  const unready = new Counter({
    name: 'proxy_operator_proxies_unready_total',
    help: 'Ready proxies taken out of discovery (every cause).',
    labelNames: ['provider'],
    registers: [registry],
  });
  const evictions = new Counter({
    name: 'proxy_operator_proxy_evictions_total',
    help: 'Ready proxies taken out of discovery, by cause (timeout, refused, probe-failed, process-exited).',
    labelNames: ['provider', 'cause'],
    registers: [registry],
  });
  const readyToEvicted = new Histogram({
    name: 'proxy_operator_proxy_ready_to_evicted_seconds',
    help: 'How long a proxy had been Ready when it was taken out of discovery.',
    labelNames: ['provider'],
    buckets: READY_BUCKETS,
    registers: [registry],
  });
  const replaced = new Counter({
    name: 'proxy_operator_proxy_replacements_total',
    help: 'Instances replaced after their proxy stayed unready too long.',
    labelNames: ['provider'],
    registers: [registry],
  });
  const metrics: ReconcileMetrics = {
    outcome: (provider, outcome) => outcomes.inc({ provider, outcome }),
    probe: (provider, ok, durationSeconds) => {
      const result = ok ? 'ok' : 'failed';
      probes.inc({ provider, result });
      if (durationSeconds !== undefined) probeSeconds.observe({ provider, result }, durationSeconds);
    },
    evicted: (provider, cause, readySeconds) => {
      unready.inc({ provider });
      evictions.inc({ provider, cause });
      if (readySeconds !== undefined) readyToEvicted.observe({ provider }, readySeconds);
    },
    replaced: (provider) => replaced.inc({ provider }),
  };
  byRegistry.set(registry, metrics);
  return metrics;
}
