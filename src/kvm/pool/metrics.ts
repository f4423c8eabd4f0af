/** Prometheus metrics of the KVM host pool, created against a registry passed in. */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface KvmPoolMetrics {
  /** Dials by host, the stage that failed (or `ok`) and outcome (`ok`, `error`, `aborted`). */
  dials: Counter<'host' | 'stage' | 'outcome'>;
  /** Open host connections (all hosts) in this process. */
  openConnections: Gauge;
  /** Functions running on a host connection, by mode (`call`, `probe`); abandoned probes count until they settle. */
  callsInFlight: Gauge<'host' | 'mode'>;
}

export function createKvmPoolMetrics(registry: Registry): KvmPoolMetrics {
  return {
    dials: new Counter({
      name: 'proxy_operator_kvm_dials_total',
      help: 'KVM host dials by host, failing stage (ok on success) and outcome',
      labelNames: ['host', 'stage', 'outcome'] as const,
      registers: [registry],
    }),
    openConnections: new Gauge({
      name: 'proxy_operator_kvm_open_connections',
      help: 'Open KVM host connections (SSH + libvirt) in this process',
      registers: [registry],
    }),
    callsInFlight: new Gauge({
      name: 'proxy_operator_kvm_calls_in_flight',
      help: 'Functions running on a pooled KVM host connection, by mode (call or probe)',
      labelNames: ['host', 'mode'] as const,
      registers: [registry],
    }),
  };
}
