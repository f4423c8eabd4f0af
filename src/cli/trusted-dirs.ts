import type { AppConfig } from '../config/app.ts';
import { freezeConfig } from '../config/app.ts';
import { ConfigError } from '../errors.ts';
import { resolveTrustedDir } from '../fs/private-path.ts';
import { localDataDir } from '../providers/local/config.ts';
import { upstreamDataDir } from '../providers/upstream/config.ts';
import type { RoleName } from './start-roles.ts';

/**
 * How deep beneath a local provider's data directory everything is checked at start: `bin/`,
 * `host/`, `addresses/` and `instances/<name>/` with their files.
 */
const LOCAL_TREE_DEPTH = 3;

async function trusted(flag: string, dir: string, create: boolean, treeDepth = 0): Promise<string> {
  try {
    return await resolveTrustedDir(dir, { create, treeDepth });
  } catch (err) {
    // Every directory the process will execute from or trust is configuration: exit 2, naming the field.
    throw new ConfigError(flag, (err as Error).message, { cause: err });
  }
}

/**
 * Checks, before anything starts (and for `--check-config`), every directory the process will
 * execute programs from or trust files in — `--data-dir` when it starts its own Redis, and each
 * local (and upstream) provider's data directory when it runs a worker — by the rules of src/fs/private-path.ts,
 * and returns the configuration with those paths resolved (symbolic links followed once, here).
 * With `create` (a real start) missing directories are made 0700; without it nothing is changed.
 * Throws ConfigError naming the flag or field (`providers[0].dataDir: …`).
 */
export async function prepareTrustedDirs(config: AppConfig, roles: readonly RoleName[], create: boolean): Promise<AppConfig> {
  const ownRedis = config.redis.url === undefined && config.redis.clusterNodes === undefined;
  const dataDir = ownRedis ? await trusted('--data-dir', config.dataDir, create) : config.dataDir;
  if (!roles.includes('worker')) return dataDir === config.dataDir ? config : freezeConfig({ ...config, dataDir });
  const providers = [];
  for (const [i, provider] of config.providers.entries()) {
    // An upstream provider's fronts are served by a proxy host run from its data directory, as local proxies are.
    if (provider.type === 'local') {
      const dir = await trusted(`providers[${i}].dataDir`, localDataDir(provider, dataDir), create, LOCAL_TREE_DEPTH);
      providers.push({ ...provider, dataDir: dir });
    } else if (provider.type === 'upstream') {
      const dir = await trusted(`providers[${i}].dataDir`, upstreamDataDir(provider, dataDir), create, LOCAL_TREE_DEPTH);
      providers.push({ ...provider, dataDir: dir });
    } else providers.push(provider);
  }
  return freezeConfig({ ...config, dataDir, providers });
}
