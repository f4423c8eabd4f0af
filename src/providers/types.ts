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
  /** Releases clients and pooled connections. Idempotent. */
  close(): Promise<void>;
}
