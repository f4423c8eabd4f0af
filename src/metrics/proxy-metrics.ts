import { Counter, Gauge, type Registry } from 'prom-client';
import { PROXY_PHASES } from '../proxies/resource.ts';
import type { ProxyStore } from '../store/proxy-store.ts';

/** `proxy_operator_proxies{provider,phase}`, counted from the store at scrape time (every phase reported, zeros included). */
export function registerProxyGauge(registry: Registry, proxies: ProxyStore, providers: readonly string[]): void {
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
  probe(provider: string, ok: boolean): void;
  unready(provider: string): void;
  replaced(provider: string): void;
}

/** Reconcile outcomes and readiness events, counted in the worker that runs them. */
export function createReconcileMetrics(registry: Registry): ReconcileMetrics {
  const outcomes = new Counter({ name: 'proxy_operator_reconciles_total', help: 'Reconciles by provider and outcome (ready, failed, deleted, retry-later, gone).', labelNames: ['provider', 'outcome'], registers: [registry] });
  const probes = new Counter({ name: 'proxy_operator_readiness_probes_total', help: 'Readiness probes through proxies, by provider and result.', labelNames: ['provider', 'result'], registers: [registry] });
  const unready = new Counter({ name: 'proxy_operator_proxies_unready_total', help: 'Ready proxies taken out of discovery after failing probes in a row.', labelNames: ['provider'], registers: [registry] });
  const replaced = new Counter({ name: 'proxy_operator_proxy_replacements_total', help: 'Instances replaced after their proxy stayed unready too long.', labelNames: ['provider'], registers: [registry] });
  return {
    outcome: (provider, outcome) => outcomes.inc({ provider, outcome }),
    probe: (provider, ok) => probes.inc({ provider, result: ok ? 'ok' : 'failed' }),
    unready: (provider) => unready.inc({ provider }),
    replaced: (provider) => replaced.inc({ provider }),
  };
}
