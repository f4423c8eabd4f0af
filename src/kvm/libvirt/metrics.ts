/**
 * Metrics of libvirt RPC calls. One histogram sample per procedure call (streams included),
 * labelled by procedure name and outcome.
 */
import { Histogram, type Registry } from 'prom-client';
import { ConnectionLostError, LibvirtAbortError, LibvirtAuthError, LibvirtError, LibvirtProtocolError } from './errors.ts';
import { XdrError } from './xdr.ts';

/**
 * `ok`, a LibvirtError kind (`not-found`, `exists`, `invalid-state`, `auth`, `access-denied`,
 * `unsupported`, `other`), or a local failure: `aborted`, `connection-lost`, `protocol`, `error`.
 */
export type RpcOutcome = string;

export interface LibvirtMetrics {
  observeCall(procedure: string, outcome: RpcOutcome, seconds: number): void;
}

export const RPC_DURATION_METRIC = 'proxy_operator_kvm_rpc_duration_seconds';

/** Creates (or reuses, when the registry already has it) the libvirt RPC histogram. */
export function createLibvirtMetrics(registry: Registry): LibvirtMetrics {
  const existing = registry.getSingleMetric(RPC_DURATION_METRIC);
  const duration =
    existing instanceof Histogram
      ? (existing as Histogram<'procedure' | 'outcome'>)
      : new Histogram({
          name: RPC_DURATION_METRIC,
          help: 'Duration of libvirt remote procedure calls, by procedure and outcome.',
          labelNames: ['procedure', 'outcome'],
          buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
          registers: [registry],
        });
  return {
    observeCall(procedure, outcome, seconds) {
      duration.observe({ procedure, outcome }, seconds);
    },
  };
}

/** The outcome label for a call that failed with `err`. */
export function outcomeOf(err: unknown): RpcOutcome {
  if (err instanceof LibvirtError) return err.kind;
  if (err instanceof LibvirtAuthError) return 'auth';
  if (err instanceof LibvirtAbortError) return 'aborted';
  if (err instanceof ConnectionLostError) return 'connection-lost';
  if (err instanceof LibvirtProtocolError || err instanceof XdrError) return 'protocol';
  return 'error';
}
