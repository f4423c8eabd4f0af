import type { Secrets } from '../secrets/secret-registry.ts';
import type { ProxyResolver } from '../model/traffic.ts';
import type { Registry } from 'prom-client';
import type { ProviderType } from './config.ts';
import type { EgressGuards } from '../egress/policy-config.ts';
import type { HealthCheck } from '../health/types.ts';
import type { Logger } from '../logging.ts';
import type { ProxyLifecycle } from './lifecycle.ts';

/** What every provider is given when it is built. Providers own their clients and close them. */
export interface ProviderDeps {
  logger: Logger;
  /** The process's own prom-client registry (prefix `proxy_operator_`). */
  registry: Registry;
  /** The orchestrator's data directory (`./.egress` by default). */
  dataDir: string;
  /**
   * This process's own listeners (Redis, API, metrics) and the readiness echo, which every proxy
   * the provider makes must refuse (all but the echo's one path). Always given by runRoles; absent
   * only where a test builds a provider by hand, and then only the default deny applies.
   */
  egress?: EgressGuards;
  /**
   * The process's secret registry (src/secrets): a provider tells it the tokens it authenticates with
   * (a kubeconfig's bearer token or password, GCE access tokens as they are read or refreshed), and
   * the kvm lifecycle redacts its errors with it (libvirt quotes the domain XML and QEMU's command line,
   * where the proxy's password is an SMBIOS string). Absent
   * where a test builds a provider by hand.
   */
  secrets?: Secrets;
  /**
   * Which proxy and pool an instance belongs to (src/proxies/proxy-resolver.ts), for the traffic
   * metric's `pool` label; absent (a test building a provider by hand): the pool label is empty.
   */
  proxyResolver?: ProxyResolver;
}

/**
 * The provider port. It carries no SDK or connection types, so the scheduler, workers and
 * publisher never learn how a provider talks to its backend. `check` is required: the type
 * system guarantees that every provider has a health check.
 */
export interface Provider extends HealthCheck {
  readonly name: string;
  readonly type: ProviderType;
  /** The targets a check reports on, in order; used to report `Timeout` for a check that never returns. */
  targets(): string[];
  /** Creates and deletes proxy instances; absent while a provider is configured for health only. */
  readonly lifecycle?: ProxyLifecycle;
  /**
   * Proxies the provider declares itself (an `upstream` provider: one per endpoint listed), which
   * the orchestrator keeps in the store while they are declared (src/proxies/declared-proxies.ts).
   * Rejects when the list cannot be read: nothing is then created or deleted.
   */
  declaredProxies?(signal: AbortSignal): Promise<DeclaredProxy[]>;
  /** Releases clients and pooled connections. Idempotent. */
  close(): Promise<void>;
}

/** A Proxy a provider declares: its name and labels (its spec names the provider). */
export interface DeclaredProxy {
  name: string;
  labels: Record<string, string>;
}
