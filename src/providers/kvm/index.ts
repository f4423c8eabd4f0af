import { createKvmHostPool, type KvmHostPool } from '../../kvm/pool/index.ts';
import { remoteProxyEgressPolicy } from '../../egress/policy-config.ts';
import type { Provider, ProviderDeps } from '../types.ts';
import { checkKvmHost } from './check.ts';
import type { KvmProviderConfig } from './config.ts';
import { createKvmLifecycle } from './lifecycle.ts';
import { kvmMetricsFor } from './metrics.ts';

export { kvmProviderSchema, kvmHostSchema, type KvmProviderConfig, type KvmHostConfig } from './config.ts';
export { checkKvmHost, kvmFailureReason } from './check.ts';

export interface KvmProvider extends Provider {
  readonly type: 'kvm';
  /** The process's connections to this provider's hosts (one per host). */
  readonly pool: KvmHostPool;
}

/**
 * The KVM provider: libvirt domains on hosts reached over SSH. It owns one host pool per
 * process — one SSH + libvirt connection per host, dialled lazily, shared by every job.
 */
export function createKvmProvider(config: KvmProviderConfig, deps: ProviderDeps): KvmProvider {
  const metrics = kvmMetricsFor(deps.registry);
  const pool = createKvmHostPool({
    logger: deps.logger,
    metrics: metrics.pool,
    idleTimeoutMs: config.idleTimeout,
    dialOptions: { libvirtMetrics: metrics.libvirt },
  });
  const lifecycle = config.proxies
    ? createKvmLifecycle({
        pool,
        hosts: config.hosts,
        logger: deps.logger,
        options: config.proxies,
        egressPolicy: remoteProxyEgressPolicy(config.proxies.egressPolicy, deps.egress),
        ...(deps.secrets ? { secrets: deps.secrets } : {}),
      })
    : undefined;
  return {
    name: config.name,
    type: 'kvm',
    pool,
    ...(lifecycle ? { lifecycle } : {}),
    targets: () => config.hosts.map((h) => h.name),
    // All hosts at once: a dead host costs the round its deadline, never the other hosts' answers.
    check: (signal) => Promise.all(config.hosts.map((host) => checkKvmHost(pool, host, signal))),
    close: () => pool.close(),
  };
}
