import { join } from 'node:path';
import type { Provider, ProviderDeps } from '../types.ts';
import { checkLocal, LOCAL_TARGET } from './check.ts';
import { createLocalLifecycle } from './lifecycle.ts';
import type { LocalProviderConfig } from './config.ts';

export { localProviderSchema, type LocalProviderConfig } from './config.ts';

/** The local provider: forward-proxy processes on this machine, state under its data directory. */
export function createLocalProvider(config: LocalProviderConfig, deps: ProviderDeps): Provider {
  const dataDir = config.dataDir ?? join(deps.dataDir, 'local', config.name);
  const lifecycle = createLocalLifecycle({ dataDir, logger: deps.logger });
  return {
    name: config.name,
    type: 'local',
    lifecycle,
    targets: () => [LOCAL_TARGET],
    check: (signal) => checkLocal(dataDir, signal),
    close: () => Promise.resolve(),
  };
}
