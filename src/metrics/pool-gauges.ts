import { Gauge, type Registry } from 'prom-client';
import type { PoolReader } from '../store/pool-store.ts';

/** The member counts a pool's status holds, as the gauge's `state` label names them. */
export const POOL_MEMBER_STATES = ['desired', 'current', 'ready', 'rotating', 'failed'] as const;

/**
 * Each pool's status read from the store at scrape time, like the proxy and provider gauges, so
 * every API replica reports the same:
 *
 * - `proxy_operator_pool_members{pool,state}`: desired (spec.replicas, or the autoscaler's count),
 *   current, ready, rotating, failed;
 * - `proxy_operator_pool_budget_used_ratio{pool,limit}`: each budget limit (spend, traffic) used
 *   within its window, 1 = spent (only pools with a budget and usage data);
 * - `proxy_operator_pool_autoscale_replicas{pool,kind}`: an autoscaled pool's desired count and its
 *   min and max; `proxy_operator_pool_pick_rate{pool}`: its smoothed picks per minute.
 */
export function registerPoolGauges(registry: Registry, pools: PoolReader): void {
  let listing: Promise<Awaited<ReturnType<PoolReader['list']>>> | undefined;
  // One listing serves the four gauges of one scrape.
  const list = (): Promise<Awaited<ReturnType<PoolReader['list']>>> => {
    listing ??= pools.list().finally(() => setTimeout(() => (listing = undefined), 0));
    return listing;
  };
  new Gauge({
    name: 'proxy_operator_pool_members',
    help: 'ProxyPool members by pool and state (desired = spec.replicas or the autoscaler count; current, ready, rotating, failed as the pool reconcile last counted them).',
    labelNames: ['pool', 'state'],
    registers: [registry],
    async collect() {
      const all = await list();
      this.reset();
      for (const p of all) for (const state of POOL_MEMBER_STATES) this.set({ pool: p.name, state }, p.status[state]);
    },
  });
  new Gauge({
    name: 'proxy_operator_pool_budget_used_ratio',
    help: 'Share of each ProxyPool budget limit used within its window (UTC day or month); 1 = spent.',
    labelNames: ['pool', 'limit'],
    registers: [registry],
    async collect() {
      const all = await list();
      this.reset();
      for (const p of all) {
        const b = p.spec.budget ? p.status.budget : undefined;
        if (!b || b.noUsageData) continue;
        if (b.spend) this.set({ pool: p.name, limit: 'spend' }, b.spend.ratio);
        if (b.traffic) this.set({ pool: p.name, limit: 'traffic' }, b.traffic.ratio);
      }
    },
  });
  new Gauge({
    name: 'proxy_operator_pool_autoscale_replicas',
    help: 'An autoscaled ProxyPool: the member count its autoscaler asks for (kind=desired) and spec.autoscale minReplicas and maxReplicas.',
    labelNames: ['pool', 'kind'],
    registers: [registry],
    async collect() {
      const all = await list();
      this.reset();
      for (const p of all) {
        const a = p.spec.autoscale;
        if (!a) continue;
        this.set({ pool: p.name, kind: 'desired' }, p.status.autoscale?.desired ?? p.status.desired);
        this.set({ pool: p.name, kind: 'min' }, a.minReplicas);
        this.set({ pool: p.name, kind: 'max' }, a.maxReplicas);
      }
    },
  });
  new Gauge({
    name: 'proxy_operator_pool_pick_rate',
    help: 'An autoscaled ProxyPool: picks per minute, smoothed, as its autoscaler last read them.',
    labelNames: ['pool'],
    registers: [registry],
    async collect() {
      const all = await list();
      this.reset();
      for (const p of all) if (p.spec.autoscale && p.status.autoscale) this.set({ pool: p.name }, p.status.autoscale.rate);
    },
  });
}
