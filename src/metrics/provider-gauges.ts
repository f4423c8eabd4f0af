import { Gauge, type Registry } from 'prom-client';
import type { StatusStore } from '../store/status-store.ts';

/**
 * The three per-target gauges, computed at scrape time from the status store, so whichever
 * process serves /metrics reports what the publisher last wrote (no per-process drift).
 */
export function registerProviderGauges(registry: Registry, store: StatusStore): void {
  const labelNames = ['provider', 'target'] as const;
  const up = new Gauge({
    name: 'proxy_operator_provider_target_up',
    help: 'Whether the last health check of a provider target passed (1) or not (0).',
    labelNames,
    registers: [registry],
  });
  const duration = new Gauge({
    name: 'proxy_operator_provider_check_duration_seconds',
    help: 'How long the last health check of a provider target took.',
    labelNames,
    registers: [registry],
  });
  new Gauge({
    name: 'proxy_operator_provider_check_timestamp_seconds',
    help: 'Unix time of the last health check of a provider target.',
    labelNames,
    registers: [registry],
    async collect() {
      const all = await store.listProviderHealth();
      up.reset();
      duration.reset();
      this.reset();
      for (const ph of all) {
        for (const t of ph.status.targets) {
          const labels = { provider: ph.name, target: t.name };
          up.set(labels, t.ready ? 1 : 0);
          duration.set(labels, t.durationSeconds);
          this.set(labels, Date.parse(t.lastCheckTime) / 1000);
        }
      }
    },
  });
}
