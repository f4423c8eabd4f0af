import type { TargetResult } from '../../health/types.ts';
import type { Provider, ProviderDeps } from '../types.ts';
import { remoteProxyEgressPolicy } from '../../egress/policy-config.ts';
import { lazyLifecycle } from '../lazy-lifecycle.ts';
import { createGcpLifecycle } from './lifecycle.ts';
import { classifyComputeError, truncateMessage } from './classify.ts';
import { computeClientOptions, computeEndpoint, createComputeClients, type ComputeClients } from './clients.ts';
import type { GcpProviderConfig } from './config.ts';
import { aggregatedListFirstPage, countInstances } from './first-page.ts';
import { MANAGED_FILTER } from './labels.ts';

export const GCP_TARGET = 'compute';

export interface GcpProviderOptions {
  /** Ready clients instead of building them from the config (tests, embedding). Closed by the provider. */
  clients?: ComputeClients;
}

/**
 * The gcp provider. Its health check sends exactly one request: one page of the aggregated instance list
 * with `maxResults=1` and the managed-instance filter, so it proves the credentials, the
 * `compute.instances.list` permission and that the Compute API is enabled, whatever the project's size.
 * The Compute clients are created on first use (that costs ~0.7 s) and reused.
 * Throws ConfigError at creation when a credentials or token file cannot be read.
 */
export function createGcpProvider(config: GcpProviderConfig, deps: ProviderDeps, options: GcpProviderOptions = {}): Provider {
  const clientOptions = options.clients ? undefined : computeClientOptions(config, `providers.${config.name}`, deps.secrets);
  const endpoint = computeEndpoint(config);
  // createProvider() already binds `provider` to the logger.
  const log = deps.logger.child({ type: 'gcp', project: config.project, endpoint });
  let clients: ComputeClients | undefined = options.clients;
  let closed = false;

  const getClients = (): ComputeClients => (clients ??= createComputeClients(clientOptions ?? {}));

  async function check(signal: AbortSignal): Promise<TargetResult[]> {
    const started = performance.now();
    const details = { project: config.project, endpoint };
    const result = (ready: boolean, reason: TargetResult['reason'], message: string): TargetResult[] => [
      { target: GCP_TARGET, ready, reason, message: truncateMessage(message), details, durationSeconds: (performance.now() - started) / 1000 },
    ];
    if (closed) return result(false, 'Error', 'provider is closed');
    try {
      const page = await aggregatedListFirstPage(getClients().instances, { project: config.project, filter: MANAGED_FILTER, maxResults: 1 }, signal);
      const seen = countInstances(page) > 0 ? 'at least one managed instance' : 'no managed instances';
      return result(true, 'Ok', `listed instances in project ${config.project} (${seen})`);
    } catch (err) {
      if (signal.aborted) {
        log.debug({ err }, 'health check ended by its signal');
        return result(false, 'Timeout', `no answer from the Compute API at ${endpoint} before the check timed out`);
      }
      const { reason, message } = classifyComputeError(err);
      log.debug({ reason, err }, 'health check failed');
      return result(false, reason, message);
    }
  }

  const proxies = config.proxies;
  const lifecycle = proxies
    ? lazyLifecycle(() =>
        createGcpLifecycle({
          clients: getClients(),
          project: config.project,
          zone: config.zone,
          image: proxies.image,
          instanceTemplate: proxies.instanceTemplate,
          machineType: proxies.machineType,
          network: proxies.network,
          networkTags: proxies.networkTags,
          port: proxies.port,
          provider: config.name,
          ...(proxies.firewall ? { firewall: proxies.firewall } : {}),
          egressPolicy: remoteProxyEgressPolicy(proxies.egressPolicy, deps.egress),
          bootUserData: proxies.bootUserData,
          logger: deps.logger,
        }),
      )
    : undefined;
  return {
    ...(lifecycle ? { lifecycle } : {}),
    name: config.name,
    type: 'gcp',
    check,
    targets: () => [GCP_TARGET],
    close: async () => {
      if (closed) return;
      closed = true;
      await clients?.close();
    },
  };
}
