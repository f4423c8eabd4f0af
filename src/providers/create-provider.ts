import type { ProviderConfig } from './config.ts';
import { EgressError } from '../errors.ts';
import { createLocalProvider } from './local/index.ts';
import type { Provider, ProviderDeps } from './types.ts';

export type ProviderFactory = (config: ProviderConfig, deps: ProviderDeps) => Provider | Promise<Provider>;

/**
 * Builds the provider for a configuration entry. The switch is exhaustive: a new type must be
 * handled here. Cloud and KVM providers are imported on first use, so a process that never
 * builds one (the CLI, the API, a local-only `egress up`) does not pay for their SDKs
 * (@google-cloud/compute alone takes over a second to load).
 */
export const createProvider: ProviderFactory = async (config, deps) => {
  const d = { ...deps, logger: deps.logger.child({ provider: config.name }) };
  switch (config.type) {
    case 'local':
      return createLocalProvider(config, d);
    case 'kvm':
      return (await import('./kvm/index.ts')).createKvmProvider(config, d);
    case 'kubernetes':
      return (await import('./kubernetes/index.ts')).createKubernetesProvider(config, d);
    case 'upstream':
      return (await import('./upstream/index.ts')).createUpstreamProvider(config, d);
    case 'gcp':
      return (await import('./gcp/index.ts')).createGcpProvider(config, d);
    default: {
      const unknown: never = config;
      throw new EgressError('ERR_PROVIDER_TYPE', `unknown provider type in ${JSON.stringify(unknown)}`);
    }
  }
};

/** Builds every configured provider; on failure, closes those already built. */
export async function createProviders(
  configs: readonly ProviderConfig[],
  deps: ProviderDeps,
  factory: ProviderFactory = createProvider,
): Promise<Map<string, Provider>> {
  const providers = new Map<string, Provider>();
  try {
    for (const c of configs) providers.set(c.name, await factory(c, deps));
  } catch (err) {
    await Promise.allSettled([...providers.values()].map((p) => p.close()));
    throw err;
  }
  return providers;
}
