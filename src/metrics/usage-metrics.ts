import { Counter, Gauge, type Registry } from 'prom-client';
import type { UsageStore } from '../usage/usage-store.ts';

/**
 * `proxy_operator_instances{provider,location,machine_type}`: the instances whose lives are open in
 * the usage store (docs/usage.md), read at scrape time like the other store gauges, so every API
 * replica reports the same. Instance-hours are its integral (`sum_over_time` of the gauge × the scrape interval).
 */
export function registerUsageGauges(registry: Registry, usage: Pick<UsageStore, 'runningInstances'>): void {
  new Gauge({
    name: 'proxy_operator_instances',
    help: 'Instances running, by provider, location and machine type (open lives in the usage store).',
    labelNames: ['provider', 'location', 'machine_type'],
    registers: [registry],
    async collect() {
      const running = await usage.runningInstances(AbortSignal.timeout(2000));
      this.reset();
      const counts = new Map<string, { provider: string; location: string; machine_type: string; n: number }>();
      for (const life of running) {
        const id = `${life.provider}\u001f${life.location}\u001f${life.machineType}`;
        const c = counts.get(id) ?? { provider: life.provider, location: life.location, machine_type: life.machineType, n: 0 };
        c.n += 1;
        counts.set(id, c);
      }
      for (const { n, ...labels } of counts.values()) this.set(labels, n);
    },
  });
}

/** `proxy_operator_usage_life_failures_total{what,reason}`: instance starts and ends the usage store did not take (per process). */
export function createLifeFailureCounter(registry: Registry): (what: 'start' | 'end', reason: 'error' | 'overload') => void {
  const counter = new Counter({
    name: 'proxy_operator_usage_life_failures_total',
    help: 'Instance starts and ends not recorded in the usage store (reason: error, overload).',
    labelNames: ['what', 'reason'],
    registers: [registry],
  });
  for (const what of ['start', 'end']) for (const reason of ['error', 'overload']) counter.inc({ what, reason }, 0);
  return (what, reason) => counter.inc({ what, reason });
}
