import { Gauge, type Registry } from 'prom-client';
import type { PoolReader } from '../store/pool-store.ts';

/** The member counts a pool's status holds, as the gauge's `state` label names them. */
export const POOL_MEMBER_STATES = ['desired', 'current', 'ready', 'rotating', 'failed'] as const;

/**
 * `proxy_operator_pool_members{pool,state}`: each pool's status counts (desired = spec.replicas,
 * current, ready, rotating, failed), read from the store at scrape time like the proxy and
 * provider gauges, so every API replica reports the same.
 */
export function registerPoolGauges(registry: Registry, pools: PoolReader): void {
  new Gauge({
    name: 'proxy_operator_pool_members',
    help: 'ProxyPool members by pool and state (desired = spec.replicas; current, ready, rotating, failed as the pool reconcile last counted them).',
    labelNames: ['pool', 'state'],
    registers: [registry],
    async collect() {
      const list = await pools.list();
      this.reset();
      for (const p of list) {
        this.set({ pool: p.name, state: 'desired' }, p.spec.replicas);
        for (const state of POOL_MEMBER_STATES) if (state !== 'desired') this.set({ pool: p.name, state }, p.status[state]);
      }
    },
  });
}
