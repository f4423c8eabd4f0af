import type { ProviderConfig } from '../config/providers.ts';
import { EgressError } from '../errors.ts';
import { createGcpProvider } from './gcp/index.ts';
import { createKubernetesProvider } from './kubernetes/index.ts';
import { createKvmProvider } from './kvm/index.ts';
import { createLocalProvider } from './local/index.ts';
import type { Provider, ProviderDeps } from './types.ts';

export type ProviderFactory = (config: ProviderConfig, deps: ProviderDeps) => Provider;

/** Builds the provider for a configuration entry. The switch is exhaustive: a new type must be handled here. */
export const createProvider: ProviderFactory = (config, deps) => {
  const logger = deps.logger.child({ provider: config.name });
  switch (config.type) {
    case 'local':
      return createLocalProvider(config, { ...deps, logger });
    case 'kvm':
      return createKvmProvider(config, { ...deps, logger });
    case 'kubernetes':
      return createKubernetesProvider(config, { ...deps, logger });
    case 'gcp':
      return createGcpProvider(config, { ...deps, logger });
    default: {
      const unknown: never = config;
      throw new EgressError('ERR_PROVIDER_TYPE', `unknown provider type in ${JSON.stringify(unknown)}`);
    }
  }
};

/** Builds every configured provider; on failure, closes those already built. */
export async function createProviders(configs: readonly ProviderConfig[], deps: ProviderDeps, factory: ProviderFactory = createProvider): Promise<Map<string, Provider>> {
  const providers = new Map<string, Provider>();
  try {
    for (const c of configs) providers.set(c.name, factory(c, deps));
  } catch (err) {
    await Promise.allSettled([...providers.values()].map((p) => p.close()));
    throw err;
  }
  return providers;
}
