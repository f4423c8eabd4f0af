import { Gauge, type Registry } from 'prom-client';
import type { ProviderHealth, TargetStatus } from '../health/provider-health.ts';
import type { StatusStore } from '../store/status-store.ts';

/**
 * The three per-target gauges, computed at scrape time from the status store, so whichever
 * process serves /metrics reports what the publisher last wrote (no per-process drift).
 * One read of the store serves all three gauges of a scrape.
 */
export function registerProviderGauges(registry: Registry, store: StatusStore): void {
  let snapshot: Promise<ProviderHealth[]> | undefined;
  const read = (): Promise<ProviderHealth[]> => {
    if (!snapshot) {
      snapshot = store.listProviderHealth();
      const clear = (): void => {
        setImmediate(() => (snapshot = undefined));
      };
      snapshot.then(clear, clear);
    }
    return snapshot;
  };
  const gauge = (name: string, help: string, value: (t: TargetStatus) => number): void => {
    new Gauge({
      name,
      help,
      labelNames: ['provider', 'target'],
      registers: [registry],
      async collect() {
        const all = await read();
        this.reset();
        for (const ph of all) for (const t of ph.status.targets) this.set({ provider: ph.name, target: t.name }, value(t));
      },
    });
  };
  gauge('proxy_operator_provider_target_up', 'Whether the last health check of a provider target passed (1) or not (0).', (t) => (t.ready ? 1 : 0));
  gauge('proxy_operator_provider_check_duration_seconds', 'How long the last health check of a provider target took.', (t) => t.durationSeconds);
  gauge(
    'proxy_operator_provider_check_timestamp_seconds',
    'Unix time of the last health check of a provider target.',
    (t) => Date.parse(t.lastCheckTime) / 1000,
  );
}
