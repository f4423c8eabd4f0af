import { readFileSync } from 'node:fs';
import type { StoreSettings } from '../config/app.ts';
import { ConfigError } from '../errors.ts';
import type { KubeConnectionConfig } from '../clients/kubernetes/kubeconfig.ts';

/** The `--store*` flags as commander hands them over. */
export interface StoreFlags {
  store: string;
  storeKubeconfig?: string;
  storeContext?: string;
  storeServer?: string;
  storeTokenFile?: string;
  storeCaFile?: string;
  storeSkipTlsVerify?: boolean;
  storeNamespace?: string;
}

export const STORE_KINDS = ['redis', 'kubernetes'] as const;

/** The flag that sets each connection field (what errors name). */
const FLAG_OF: Record<keyof KubeConnectionConfig, string> = {
  kubeconfig: '--store-kubeconfig',
  context: '--store-context',
  server: '--store-server',
  tokenFile: '--store-token-file',
  caFile: '--store-ca-file',
  skipTLSVerify: '--store-skip-tls-verify',
};

/** A Kubernetes name of a namespace: a DNS label. */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function kubernetesFlagsGiven(flags: StoreFlags): string[] {
  const given: string[] = [];
  if (flags.storeKubeconfig !== undefined) given.push('--store-kubeconfig');
  if (flags.storeContext !== undefined) given.push('--store-context');
  if (flags.storeServer !== undefined) given.push('--store-server');
  if (flags.storeTokenFile !== undefined) given.push('--store-token-file');
  if (flags.storeCaFile !== undefined) given.push('--store-ca-file');
  if (flags.storeSkipTlsVerify) given.push('--store-skip-tls-verify');
  if (flags.storeNamespace !== undefined) given.push('--store-namespace');
  return given;
}

function checkReadable(flag: string, file: string): void {
  try {
    readFileSync(file);
  } catch (err) {
    throw new ConfigError(flag, `cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * `--store redis|kubernetes` and how to reach the API server in the second case: the shapes the
 * kubernetes provider reads (a kubeconfig and context, a server with a token file and CA, or the
 * in-cluster service account), plus the namespace Proxies live in (`--store-namespace`, else the
 * context's namespace — in a cluster, the service account's — else `default`). Everything is
 * checked now, with errors naming the flag; Redis stays for the queues in both modes. The Kubernetes
 * client is loaded only for `--store kubernetes` (it costs more at start than the rest of `egress up`).
 */
export async function parseStoreSettings(flags: StoreFlags): Promise<StoreSettings> {
  if (!(STORE_KINDS as readonly string[]).includes(flags.store)) {
    throw new ConfigError('--store', `expected one of ${STORE_KINDS.join(', ')}, got "${flags.store}"`);
  }
  const given = kubernetesFlagsGiven(flags);
  if (flags.store === 'redis') {
    if (given.length > 0) throw new ConfigError(given[0] ?? '--store', 'only used with --store kubernetes');
    return { kind: 'redis' };
  }
  if (flags.storeContext !== undefined && flags.storeKubeconfig === undefined) throw new ConfigError('--store-context', 'only used with --store-kubeconfig');
  if (flags.storeKubeconfig !== undefined && flags.storeServer !== undefined)
    throw new ConfigError('--store-server', 'give either --store-kubeconfig or --store-server, not both');
  if (flags.storeServer === undefined) {
    for (const flag of ['--store-token-file', '--store-ca-file', '--store-skip-tls-verify']) {
      if (given.includes(flag)) throw new ConfigError(flag, 'only used with --store-server');
    }
  } else {
    if (!URL.canParse(flags.storeServer) || !/^https?:$/.test(new URL(flags.storeServer).protocol))
      throw new ConfigError('--store-server', `expected an http:// or https:// URL, got "${flags.storeServer}"`);
    if (flags.storeTokenFile === undefined) throw new ConfigError('--store-token-file', 'required with --store-server');
    checkReadable('--store-token-file', flags.storeTokenFile);
    if (flags.storeCaFile !== undefined) checkReadable('--store-ca-file', flags.storeCaFile);
  }
  if (flags.storeNamespace !== undefined && (!NAMESPACE.test(flags.storeNamespace) || flags.storeNamespace.length > 63)) {
    throw new ConfigError('--store-namespace', `expected a namespace name (lower-case letters, digits and dashes), got "${flags.storeNamespace}"`);
  }
  const connection: KubeConnectionConfig = {
    ...(flags.storeKubeconfig === undefined ? {} : { kubeconfig: flags.storeKubeconfig }),
    ...(flags.storeContext === undefined ? {} : { context: flags.storeContext }),
    ...(flags.storeServer === undefined ? {} : { server: flags.storeServer }),
    ...(flags.storeTokenFile === undefined ? {} : { tokenFile: flags.storeTokenFile }),
    ...(flags.storeCaFile === undefined ? {} : { caFile: flags.storeCaFile }),
    skipTLSVerify: flags.storeSkipTlsVerify === true,
  };
  let namespace = flags.storeNamespace;
  try {
    const { buildKubeConfig, contextNamespace } = await import('../clients/kubernetes/kubeconfig.ts');
    const kc = buildKubeConfig(connection, 'store');
    namespace ??= contextNamespace(kc);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // The provider's wording names `store.kubeconfig`; here the flag is what the user typed.
    const field = err.path.replace(/^store\.?/, '') as keyof KubeConnectionConfig | '';
    const flag = field === '' ? '--store' : (FLAG_OF[field] ?? '--store');
    throw new ConfigError(flag, err.message.slice(err.path.length + 2), { cause: err });
  }
  return { kind: 'kubernetes', connection, namespace: namespace ?? 'default' };
}
