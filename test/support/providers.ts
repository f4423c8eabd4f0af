import type { ProviderConfig } from '../../src/providers/config.ts';
import type { TargetResult } from '../../src/health/types.ts';
import { createProvider, type ProviderFactory } from '../../src/providers/create-provider.ts';
import type { Provider } from '../../src/providers/types.ts';

/** A provider whose check never returns and ignores its signal: the worst-behaved checker. */
export function hangingProvider(config: ProviderConfig, onStart?: () => void): Provider {
  return {
    name: config.name,
    type: config.type,
    targets: () => ['localhost'],
    check: () => {
      onStart?.();
      return new Promise<TargetResult[]>(() => undefined);
    },
    close: () => Promise.resolve(),
  };
}

/**
 * The real factory, except that the providers named in `hang` get a hanging checker. Tests
 * inject it; the product has no fake provider.
 */
export function factoryWithHanging(hang: readonly string[], onStart?: (provider: string) => void): ProviderFactory {
  return (config, deps) => (hang.includes(config.name) ? hangingProvider(config, () => onStart?.(config.name)) : createProvider(config, deps));
}
