import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { KubeConfig, type User } from '@kubernetes/client-node';
import { ConfigError } from '../../errors.ts';
import type { SecretSink } from '../../secrets/secret-registry.ts';

/** How often a bearer token from `tokenFile` is re-read (projected service-account tokens rotate). */
const TOKEN_REREAD_MS = 60_000;

/**
 * How to reach an API server: the part of a kubernetes provider's config (and of `--store kubernetes`)
 * that decides it. The provider's schema (`providers/kubernetes/config.ts`) documents each field.
 */
export interface KubeConnectionConfig {
  kubeconfig?: string | undefined;
  context?: string | undefined;
  server?: string | undefined;
  tokenFile?: string | undefined;
  caFile?: string | undefined;
  skipTLSVerify: boolean;
}

/**
 * Builds the client-node `KubeConfig` for a provider, in this order of precedence:
 * 1. `kubeconfig` (+ optional `context`, otherwise the file's current context);
 * 2. `server` + `tokenFile` (+ `caFile` or `skipTLSVerify`);
 * 3. in-cluster: the Pod's service account (client-node reads KUBERNETES_SERVICE_HOST/PORT itself).
 *
 * Files are checked now, so a typo fails at start with a ConfigError naming the field; the token itself is
 * read when a request is made and re-read every minute, and never logged.
 */
export function buildKubeConfig(config: KubeConnectionConfig, path = 'provider', secrets?: SecretSink): KubeConfig {
  const kc = new KubeConfig();
  if (config.kubeconfig) {
    try {
      kc.loadFromFile(config.kubeconfig);
    } catch (err) {
      throw new ConfigError(`${path}.kubeconfig`, `cannot load kubeconfig "${config.kubeconfig}": ${errorText(err)}`, { cause: err });
    }
    if (config.context) {
      if (!kc.getContextObject(config.context)) {
        throw new ConfigError(`${path}.context`, `context "${config.context}" not found in "${config.kubeconfig}"`);
      }
      kc.setCurrentContext(config.context);
    }
  } else if (config.server) {
    if (!config.tokenFile) throw new ConfigError(`${path}.tokenFile`, 'required with server');
    checkReadable(config.tokenFile, `${path}.tokenFile`);
    if (config.caFile) checkReadable(config.caFile, `${path}.caFile`);
    if (config.server.startsWith('http:') && !config.skipTLSVerify) {
      throw new ConfigError(`${path}.server`, 'a plain http:// server needs skipTLSVerify: true');
    }
    kc.addAuthenticator(new TokenFileAuthenticator(secrets, `${path}:token-file`));
    kc.loadFromOptions({
      clusters: [{ name: 'egress', server: config.server, skipTLSVerify: config.skipTLSVerify, ...(config.caFile ? { caFile: config.caFile } : {}) }],
      users: [{ name: 'egress', authProvider: { name: TOKEN_FILE_PROVIDER, config: { path: config.tokenFile } } }],
      contexts: [{ name: 'egress', cluster: 'egress', user: 'egress' }],
      currentContext: 'egress',
    });
  } else {
    kc.loadFromCluster();
    const server = kc.getCurrentCluster()?.server ?? '';
    if (!URL.canParse(server)) {
      throw new ConfigError(path, 'no kubeconfig or server given and not running in a cluster (KUBERNETES_SERVICE_HOST/PORT unset)');
    }
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new ConfigError(path, 'the kubeconfig has no current cluster');
  if (!URL.canParse(cluster.server)) throw new ConfigError(path, `invalid API server URL "${cluster.server}"`);
  return kc;
}

/**
 * Tells `secrets` what the current user of `kc` authenticates with (a bearer token, a password): an
 * API server's error may quote a request's headers. Tokens from a token file are told as they are read.
 */
export function registerKubeSecrets(kc: KubeConfig, secrets: SecretSink | undefined, owner: string): void {
  const user = kc.getCurrentUser();
  if (secrets && user) secrets.set(owner, [user.token, user.password]);
}

/** The API server's `host[:port]`, for health-check details and logs. */
export function apiHost(kc: KubeConfig): string {
  const server = kc.getCurrentCluster()?.server ?? '';
  return URL.canParse(server) ? new URL(server).host : server;
}

/** The namespace of the current context, if the kubeconfig (or in-cluster namespace file) names one. */
export function contextNamespace(kc: KubeConfig): string | undefined {
  return kc.getContextObject(kc.getCurrentContext())?.namespace;
}

const TOKEN_FILE_PROVIDER = 'egress-token-file';

/**
 * Sends the bearer token from a file, trimmed (a trailing newline would make an invalid header), re-read
 * every minute. client-node's own `tokenFile` provider does not trim, hence this one.
 */
class TokenFileAuthenticator {
  private token: string | undefined;
  private readAt = 0;
  private readonly secrets: SecretSink | undefined;
  private readonly owner: string;

  constructor(secrets: SecretSink | undefined, owner: string) {
    this.secrets = secrets;
    this.owner = owner;
  }

  isAuthProvider(user: User): boolean {
    return (user.authProvider as { name?: string } | undefined)?.name === TOKEN_FILE_PROVIDER;
  }

  async applyAuthentication(user: User, opts: { headers?: Record<string, unknown> }): Promise<void> {
    const file = (user.authProvider as { config: { path: string } }).config.path;
    if (this.token === undefined || Date.now() - this.readAt > TOKEN_REREAD_MS) {
      this.token = (await readFile(file, 'utf8')).trim();
      this.readAt = Date.now();
      this.secrets?.set(this.owner, [this.token]);
    }
    opts.headers ??= {};
    opts.headers.Authorization = `Bearer ${this.token}`;
  }
}

function checkReadable(file: string, path: string): void {
  try {
    readFileSync(file);
  } catch (err) {
    throw new ConfigError(path, `cannot read "${file}": ${errorText(err)}`, { cause: err });
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
