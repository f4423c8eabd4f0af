import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
// The v1 clients alone: the package's main entry also loads v1beta, v1small and protos.js (30 MB of
// generated message classes, which a REST client never uses), 1.6 s and 270 MB of memory instead of
// 0.4 s and 100 MB; the Dockerfile leaves those files out of the image.
import { FirewallsClient, GlobalOperationsClient, InstancesClient, ZoneOperationsClient } from '@google-cloud/compute/build/src/v1/index.js';
import { OAuth2Client } from 'google-auth-library';
import { ConfigError } from '../../errors.ts';
import type { GcpProviderConfig } from './config.ts';
import type { SecretSink } from '../../secrets/secret-registry.ts';

/** How long a token read from `accessTokenFile` is used before the file is read again. */
const TOKEN_REREAD_MS = 60_000;

/**
 * The most of one Compute answer that is read: a page of 500 instances is about 2 MiB, the health
 * check's one-instance page a few KiB. A larger body fails the call (gaxios `max-size`) instead of
 * being buffered whole (a 700 MB answer to the check grew the worker past 1 GB).
 */
export const COMPUTE_BODY_BYTES = 16 * 1024 * 1024;

/**
 * Every request of the auth client's transport reads at most COMPUTE_BODY_BYTES: `size` bounds the
 * body as it streams in (gaxios hands it to node-fetch), `maxContentLength` refuses a larger
 * Content-Length before reading.
 */
const BODY_CAP = { size: COMPUTE_BODY_BYTES, maxContentLength: COMPUTE_BODY_BYTES };

type ComputeClientOptions = NonNullable<ConstructorParameters<typeof InstancesClient>[0]>;

export type ComputeConnectionConfig = Pick<GcpProviderConfig, 'credentialsFile' | 'accessTokenFile' | 'apiEndpoint' | 'port' | 'protocol'>;

/**
 * Client options shared by every Compute client of a provider: the endpoint (for a fake: host, a
 * separate port and `protocol: 'http'`; `apiEndpoint: 'host:port'` would not work) and the credentials:
 * - `accessTokenFile`: an OAuth2Client sending `Bearer <token>`, the file re-read every minute;
 * - `credentialsFile`: a service-account key, handed to google-auth-library;
 * - neither: Application Default Credentials.
 * Files are checked now so a typo fails at start with a ConfigError naming the field. REST is the
 * client's default (`fallback`), and must stay so: Compute has no gRPC endpoint.
 */
export function computeClientOptions(config: ComputeConnectionConfig, path = 'provider', secrets?: SecretSink): ComputeClientOptions {
  const options: ComputeClientOptions = { clientOptions: { transporterOptions: BODY_CAP } };
  if (config.apiEndpoint) options.apiEndpoint = config.apiEndpoint;
  if (config.port !== undefined) options.port = config.port;
  if (config.protocol) options.protocol = config.protocol;
  if (config.accessTokenFile) {
    checkReadable(config.accessTokenFile, `${path}.accessTokenFile`);
    options.authClient = tokenFileAuthClient(config.accessTokenFile, secrets, `${path}:access-token`);
  } else if (config.credentialsFile) {
    checkReadable(config.credentialsFile, `${path}.credentialsFile`);
    options.keyFilename = config.credentialsFile;
  }
  return options;
}

/**
 * An OAuth2Client whose token comes from a file. The token carries an expiry, so the client re-reads the
 * file through `refreshHandler` when it lapses, and never retries a 401/403 on its own (a retry would
 * break the health check's one-request guarantee). Each token read is told to `secrets` before it is
 * sent (a Compute error may quote the request's headers).
 */
export function tokenFileAuthClient(file: string, secrets?: SecretSink, owner = 'gcp:access-token'): OAuth2Client {
  const client = new OAuth2Client({ transporterOptions: BODY_CAP });
  const read = async () => {
    const token = (await readFile(file, 'utf8')).trim();
    secrets?.set(owner, [token]);
    return { access_token: token, expiry_date: Date.now() + client.eagerRefreshThresholdMillis + TOKEN_REREAD_MS };
  };
  client.refreshHandler = read;
  return client;
}

/** The endpoint a provider talks to, for details and logs: `host[:port]`. */
export function computeEndpoint(config: Pick<GcpProviderConfig, 'apiEndpoint' | 'port' | 'protocol'>): string {
  const host = config.apiEndpoint ?? 'compute.googleapis.com';
  const port = config.port ?? 443;
  const protocol = config.protocol ?? 'https';
  return (protocol === 'https' && port === 443) || (protocol === 'http' && port === 80) ? host : `${host}:${port}`;
}

export interface ComputeClients {
  instances: InstancesClient;
  /** Built on first access: the health check never needs it. */
  readonly zoneOperations: ZoneOperationsClient;
  /** Built on first access: only a provider with a managed firewall rule needs these two. */
  readonly firewalls: FirewallsClient;
  readonly globalOperations: GlobalOperationsClient;
  close(): Promise<void>;
}

/**
 * The Compute clients a provider needs, sharing options (and so one auth client). Building one loads the
 * protos (~0.7 s the first time in a process): build them once per provider and reuse them.
 */
export function createComputeClients(options: ComputeClientOptions): ComputeClients {
  const instances = new InstancesClient({ ...options });
  let zoneOperations: ZoneOperationsClient | undefined;
  let firewalls: FirewallsClient | undefined;
  let globalOperations: GlobalOperationsClient | undefined;
  return {
    instances,
    get zoneOperations() {
      return (zoneOperations ??= new ZoneOperationsClient({ ...options }));
    },
    get firewalls() {
      return (firewalls ??= new FirewallsClient({ ...options }));
    },
    get globalOperations() {
      return (globalOperations ??= new GlobalOperationsClient({ ...options }));
    },
    close: async () => {
      await Promise.allSettled([instances.close(), zoneOperations?.close(), firewalls?.close(), globalOperations?.close()]);
    },
  };
}

function checkReadable(file: string, path: string): void {
  try {
    readFileSync(file);
  } catch (err) {
    throw new ConfigError(path, `cannot read "${file}": ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}
