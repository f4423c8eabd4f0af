import type { Registry } from 'prom-client';
import { createLibvirtMetrics, type LibvirtMetrics } from '../../kvm/libvirt/index.ts';
import { createKvmPoolMetrics, type KvmPoolMetrics } from '../../kvm/pool/index.ts';

export interface KvmMetrics {
  pool: KvmPoolMetrics;
  libvirt: LibvirtMetrics;
}

const byRegistry = new WeakMap<Registry, KvmMetrics>();

/** The KVM metrics of a registry, created once however many KVM providers the process has. */
export function kvmMetricsFor(registry: Registry): KvmMetrics {
  let metrics = byRegistry.get(registry);
  if (!metrics) {
    metrics = { pool: createKvmPoolMetrics(registry), libvirt: createLibvirtMetrics(registry) };
    byRegistry.set(registry, metrics);
  }
  return metrics;
}
