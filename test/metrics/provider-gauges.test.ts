import { describe, expect, it } from 'vitest';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import { registerProviderGauges } from '../../src/metrics/provider-gauges.ts';
import { createRegistry } from '../../src/metrics/registry.ts';
import { MemoryStatusStore } from '../../src/store/memory-status-store.ts';
import type { StatusStore } from '../../src/store/status-store.ts';

/** The per-target gauges are read from the status store at scrape time (a pure test: the in-memory store). */
function health(name: string, targets: { name: string; ready: boolean; durationSeconds: number }[]): ProviderHealth {
  const at = '2026-11-01T10:00:00.000Z';
  return {
    name,
    status: {
      ready: targets.every((t) => t.ready),
      lastTransitionTime: at,
      lastCheckTime: at,
      targets: targets.map((t) => ({ ...t, reason: t.ready ? 'Ok' : 'Error', message: '', lastTransitionTime: at, lastCheckTime: at, details: {} })),
    },
  };
}

describe('provider gauges', () => {
  it('report every target of every stored ProviderHealth, follow deletions, and read the store once per scrape', async () => {
    const store = new MemoryStatusStore();
    let lists = 0;
    const counting: StatusStore = {
      getProviderHealth: (name, signal) => store.getProviderHealth(name, signal),
      updateProviderHealth: (name, update, signal) => store.updateProviderHealth(name, update, signal),
      deleteProviderHealth: (name, signal) => store.deleteProviderHealth(name, signal),
      listProviderHealth: (signal) => {
        lists++;
        return store.listProviderHealth(signal);
      },
    };
    await store.updateProviderHealth('kvm', () =>
      health('kvm', [
        { name: 'h1', ready: true, durationSeconds: 0.25 },
        { name: 'h2', ready: false, durationSeconds: 3 },
      ]),
    );
    await store.updateProviderHealth('local', () => health('local', [{ name: 'localhost', ready: true, durationSeconds: 0.001 }]));
    const registry = createRegistry();
    registerProviderGauges(registry, counting);

    const text = await registry.metrics();
    expect(lists).toBe(1);
    expect(text).toContain('proxy_operator_provider_target_up{provider="kvm",target="h1"} 1');
    expect(text).toContain('proxy_operator_provider_target_up{provider="kvm",target="h2"} 0');
    expect(text).toContain('proxy_operator_provider_target_up{provider="local",target="localhost"} 1');
    expect(text).toContain('proxy_operator_provider_check_duration_seconds{provider="kvm",target="h2"} 3');
    expect(text).toContain(
      `proxy_operator_provider_check_timestamp_seconds{provider="local",target="localhost"} ${Date.parse('2026-11-01T10:00:00.000Z') / 1000}`,
    );

    await store.deleteProviderHealth('kvm');
    // A scrape's snapshot is dropped once the scrape is over (after the current turn of the event loop).
    await new Promise((resolve) => setImmediate(resolve));
    const after = await registry.metrics();
    expect(lists).toBe(2);
    expect(after).not.toContain('provider="kvm"');
    expect(after).toContain('proxy_operator_provider_target_up{provider="local",target="localhost"} 1');
  });
});
