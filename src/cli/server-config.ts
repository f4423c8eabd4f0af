/**
 * The long-running commands' flags (and the configuration file they name) turned into the frozen
 * AppConfig, everything validated before any connection is made: each flag alone (server-flags.ts,
 * the provider-check pair first, as the seed requires), then the rules between flags
 * (flag-rules.ts), then the files they name (flag-files.ts, the configuration file, the store's).
 */
import { join, resolve } from 'node:path';
import { freezeConfig, type AppConfig, type RedisSettings } from '../config/app.ts';
import { DEFAULT_CONFIG_FILE, loadConfigFile } from '../config/file.ts';
import { telemetryFromEnv } from '../telemetry/config.ts';
import { readRedisCa, readRedisPassword, readTokens, type TokenFile } from './flag-files.ts';
import { checkAccessRules, checkProbeRules, checkRedisRules } from './flag-rules.ts';
import { LOCAL_TOKEN_FILE } from './local-api-access.ts';
import { SERVER_FLAG_DEFAULTS } from './server-flag-defaults.ts';
import { parseServerFlags, type ParsedFlags, type ServerFlags } from './server-flags.ts';
import { parseStoreSettings } from './store-config.ts';

export { SERVER_FLAG_DEFAULTS };
export type { ServerFlags };

/**
 * Where the roles' Redis is: one server (`--redis-url`), a cluster (`--redis-cluster-nodes`), or
 * neither (`egress up` starts its own). A password file and a CA file complete either.
 */
async function redisSettings(flags: ParsedFlags): Promise<RedisSettings> {
  const nodes = flags.redisClusterNodes;
  const ca = flags.redisCaFile ? await readRedisCa(flags.redisCaFile) : undefined;
  const password = flags.redisPasswordFile ? await readRedisPassword(flags.redisPasswordFile) : undefined;
  let url = flags.redisUrl;
  if (password !== undefined && url !== undefined) {
    const u = new URL(url);
    u.password = encodeURIComponent(password);
    url = u.toString();
  }
  return {
    url,
    ...(nodes ? { clusterNodes: nodes, clusterTls: flags.redisTls === true || ca !== undefined, ...(password === undefined ? {} : { password }) } : {}),
    ...(ca === undefined ? {} : { ca }),
    prefix: flags.prefix,
    lostAfterMs: flags.redisLostAfter,
  };
}

/** The API's settings: its listener, its tokens (or the data directory's own, or none with `--no-auth`) and its limits. */
function apiSettings(flags: ParsedFlags, tokenFile: TokenFile | undefined, servesApi: boolean): AppConfig['api'] {
  const noAuth = flags.auth === false;
  // An API without --api-token-file or --no-auth requires the data directory's own token (made at start).
  const localTokenFile = servesApi && tokenFile === undefined && !noAuth ? join(resolve(flags.dataDir), LOCAL_TOKEN_FILE) : undefined;
  return {
    host: flags.host,
    port: flags.port,
    tokens: tokenFile?.tokens ?? [],
    tokenNames: tokenFile?.names ?? [],
    maxBodyBytes: flags.maxBodySize,
    maxConnections: flags.maxConnections,
    maxConnectionsPerPeer: flags.maxConnectionsPerPeer,
    allowedHosts: flags.allowedHost,
    ...(localTokenFile ? { localTokenFile } : {}),
    ...(noAuth ? { noAuth: true } : {}),
    ...(flags.allowOpenTokenFile ? { allowOpenTokenFile: true } : {}),
    ...(tokenFile?.warning ? { tokenFileWarning: tokenFile.warning } : {}),
  };
}

/** Turns flags (and the configuration file they name) into the frozen AppConfig. */
export async function buildServerConfig(raw: ServerFlags, options: { defaultProviders: boolean; servesApi: boolean }): Promise<AppConfig> {
  const flags = parseServerFlags(raw);
  checkAccessRules(flags, options.servesApi);
  checkRedisRules(flags);
  checkProbeRules(flags);
  const tokenFile = flags.apiTokenFile ? await readTokens(flags.apiTokenFile, flags.allowOpenTokenFile === true) : undefined;
  const file = flags.config ? await loadConfigFile(flags.config) : options.defaultProviders ? DEFAULT_CONFIG_FILE : { providers: [] };
  const config: AppConfig = {
    providers: file.providers,
    ...(file.prices ? { prices: file.prices } : {}),
    ...(file.usage ? { usage: file.usage } : {}),
    store: await parseStoreSettings(flags),
    checks: flags.checks,
    redis: await redisSettings(flags),
    api: apiSettings(flags, tokenFile, options.servesApi),
    echoUrl: flags.echoUrl,
    recheckMs: 2000,
    resyncMs: flags.resyncInterval,
    readiness: {
      failureThreshold: flags.probeFailures,
      successThreshold: flags.probeSuccesses,
      replaceAfterMs: flags.replaceAfter,
      intervalMs: flags.probeInterval.ms,
      timeoutMs: flags.probeTimeout.ms,
    },
    gcIntervalMs: flags.gcInterval,
    gcGraceMs: flags.gcGrace,
    gcDeletesPerSecond: flags.gcDeletesPerSecond,
    metricsPort: flags.metricsPort,
    worker: {
      queues: flags.queues,
      concurrency: flags.concurrency,
      lockDurationMs: flags.lockDuration,
      stalledIntervalMs: flags.stalledInterval,
    },
    dataDir: resolve(flags.dataDir),
    logLevel: flags.logLevel,
    shutdownGraceMs: flags.shutdownGrace,
    leaseMs: flags.lease,
    backoffMs: 1000,
    retention: { completed: 1000, failed: 5000 },
    events: { maxCount: flags.eventsMaxCount, maxAgeMs: flags.eventsMaxAge },
    picks: {
      sessionTtlMs: flags.pickSessionTtl,
      memberCacheMs: flags.pickCache,
      blockCooldownMs: flags.feedbackBlockCooldown,
      replaceDomains: flags.feedbackReplaceDomains,
      replaceWindowMs: flags.feedbackReplaceWindow,
      feedbackRate: flags.feedbackRate,
      feedbackBurst: flags.feedbackBurst,
    },
    telemetry: telemetryFromEnv(flags.otelEnv),
  };
  return freezeConfig(config);
}
