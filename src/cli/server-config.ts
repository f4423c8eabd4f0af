import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import { parseAuthority } from '../http/host-authority.ts';
import { freezeConfig, QUEUE_SET, type AppConfig, type RedisSettings, type WorkQueue } from '../config/app.ts';
import { resolveCheckSchedule } from '../config/checks.ts';
import { parseByteSize } from '../schema/byte-size.ts';
import { parseDuration } from '../schema/duration.ts';
import { DEFAULT_CONFIG_FILE, loadConfigFile } from '../config/file.ts';
import { ConfigError } from '../errors.ts';
import { MAX_GC_DELETES_PER_SECOND } from '../providers/gc-settings.ts';
import { telemetryFromEnv, type OtelEnv } from '../telemetry/config.ts';
import { checkTokenFileMode, LOCAL_TOKEN_FILE } from './local-api-access.ts';
import { parseStoreSettings, type StoreFlags } from './store-config.ts';
import { SERVER_FLAG_DEFAULTS } from './server-flag-defaults.ts';

/** Options shared by the long-running commands, as commander hands them over (strings). */
export interface ServerFlags extends Partial<StoreFlags> {
  config?: string;
  providerCheckInterval: string;
  providerCheckTimeout: string;
  redisUrl?: string;
  redisClusterNodes?: string;
  redisPasswordFile?: string;
  redisCaFile?: string;
  redisTls?: boolean;
  prefix: string;
  dataDir: string;
  logLevel: string;
  shutdownGrace: string;
  host: string;
  port: string;
  apiTokenFile?: string;
  /** False with `--no-auth` (commander's negated option): no token at all, loopback only. */
  auth?: boolean;
  /** `--allow-open-token-file`: use a token file other users can read, with a warning. */
  allowOpenTokenFile?: boolean;
  maxBodySize: string;
  maxConnections: string;
  maxConnectionsPerPeer: string;
  /** Repeatable `--allowed-host`. */
  allowedHost?: string[];
  queues: string;
  concurrency: string;
  lockDuration: string;
  stalledInterval: string;
  lease: string;
  checkConfig?: boolean;
  metricsPort?: string;
  echoUrl?: string;
  gcInterval: string;
  gcGrace: string;
  gcDeletesPerSecond: string;
  resyncInterval: string;
  probeFailures: string;
  probeSuccesses: string;
  probeInterval: string;
  probeTimeout: string;
  replaceAfter: string;
  eventsMaxCount: string;
  eventsMaxAge: string;
  pickSessionTtl?: string;
  pickCache?: string;
  feedbackBlockCooldown?: string;
  feedbackReplaceDomains?: string;
  feedbackReplaceWindow?: string;
  feedbackRate?: string;
  feedbackBurst?: string;
  /** The process environment's OTEL_* variables (tracing); not a flag. */
  otelEnv?: OtelEnv;
}

export { SERVER_FLAG_DEFAULTS };

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

function positiveDuration(flag: string, text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) throw new ConfigError(flag, `expected a positive duration such as 30s, got "${text}"`);
  return ms;
}

function nonNegativeDuration(flag: string, text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms < 0) throw new ConfigError(flag, `expected a duration such as 5m (0 for off), got "${text}"`);
  return ms;
}

function integer(flag: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(flag, `expected an integer from ${min} to ${max}, got "${text}"`);
  return n;
}

/** A positive rate, fractions allowed (`0.5`: one every 2 s), at most MAX_GC_DELETES_PER_SECOND. */
function deleteRate(flag: string, text: string): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n <= 0 || n > MAX_GC_DELETES_PER_SECOND) {
    throw new ConfigError(flag, `expected a number of deletions per second above 0 and at most ${MAX_GC_DELETES_PER_SECOND} (such as 5 or 0.5), got "${text}"`);
  }
  return n;
}

function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/** A named token line: `name:token`, the name a letter then up to 62 of letters, digits, `.`, `_`, `-`. */
const NAMED_TOKEN = /^([A-Za-z][A-Za-z0-9._-]{0,62}):(.+)$/;

/**
 * The tokens of `--api-token-file`, one a line, each optionally named (`name:token`); a line
 * without a name stays valid and its caller is shown by its position (`#1` for the first token).
 * Names appear in events as who applied or deleted a proxy; the tokens themselves never leave here
 * but for the API's comparison.
 */
async function readTokens(file: string, allowOpen: boolean): Promise<{ tokens: string[]; names: string[]; warning?: string }> {
  const warning = await checkTokenFileMode(file, '--api-token-file', allowOpen);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError('--api-token-file', `cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  if (lines.length === 0) throw new ConfigError('--api-token-file', `${file} holds no token (one token a line)`);
  const tokens: string[] = [];
  const names: string[] = [];
  for (const [i, line] of lines.entries()) {
    const named = NAMED_TOKEN.exec(line);
    const token = named?.[2] ?? line;
    const name = named?.[1] ?? `#${i + 1}`;
    if (token.length < 16) throw new ConfigError('--api-token-file', `every token in ${file} must be at least 16 characters (token ${name} is shorter)`);
    if (named && names.includes(name)) throw new ConfigError('--api-token-file', `${file} names two tokens "${name}": names must be unique`);
    tokens.push(token);
    names.push(name);
  }
  return { tokens, names, ...(warning ? { warning } : {}) };
}

const MIN_BODY = 1024;
const MAX_BODY = 1024 ** 3;

function parseMaxBody(text: string): number {
  const n = parseByteSize(text);
  if (n === undefined || n < MIN_BODY || n > MAX_BODY)
    throw new ConfigError('--max-body-size', `expected a size from 1KiB to 1GiB such as 1MiB, 512KiB or 65536 (bytes), got "${text}"`);
  return n;
}

/** `--allowed-host` values: a host name or address, optionally with a port (`egress.local`, `egress.local:8080`, `[::1]:8080`). */
function parseAllowedHosts(values: readonly string[]): string[] {
  for (const text of values) {
    if (!parseAuthority(text))
      throw new ConfigError('--allowed-host', `expected a host name or address with an optional port (egress.local, egress.local:8080), got "${text}"`);
  }
  return [...values];
}

function parseQueues(text: string): WorkQueue[] {
  const queues = text
    .split(',')
    .map((q) => q.trim())
    .filter(Boolean);
  if (queues.length === 0) throw new ConfigError('--queues', 'expected at least one queue');
  for (const q of queues) {
    if (!(QUEUE_SET as readonly string[]).includes(q)) throw new ConfigError('--queues', `unknown queue "${q}" (known: ${QUEUE_SET.join(', ')})`);
  }
  return [...new Set(queues)] as WorkQueue[];
}

function parseHttpUrl(flag: string, text: string): string {
  try {
    const u = new URL(text);
    if (u.protocol === 'http:' || u.protocol === 'https:') return text;
  } catch {
    // reported below
  }
  throw new ConfigError(flag, `expected an http:// or https:// URL, got "${text}"`);
}

function parseRedisUrl(text: string | undefined): string | undefined {
  if (text === undefined || text === '') return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError('REDIS_URL', `not a URL: "${text}"`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new ConfigError('REDIS_URL', `expected redis:// or rediss://, got "${url.protocol}"`);
  return text;
}

/** The `--probe-*` flags: each probe step must fit well inside the probe interval. */
function readinessSettings(flags: ServerFlags): AppConfig['readiness'] {
  const intervalMs = nonNegativeDuration('--probe-interval', flags.probeInterval);
  if (intervalMs > 0 && intervalMs < 1000)
    throw new ConfigError('--probe-interval', `expected 0 (probe only on the resync) or at least 1s, got "${flags.probeInterval}"`);
  const timeoutMs = positiveDuration('--probe-timeout', flags.probeTimeout);
  if (intervalMs > 0 && timeoutMs * 2 > intervalMs) {
    throw new ConfigError(
      '--probe-timeout',
      `must be at most half of --probe-interval (${flags.probeInterval}): a probe has two steps under it, got "${flags.probeTimeout}"`,
    );
  }
  return {
    failureThreshold: integer('--probe-failures', flags.probeFailures, 1, 100),
    successThreshold: integer('--probe-successes', flags.probeSuccesses, 1, 100),
    replaceAfterMs: positiveDuration('--replace-after', flags.replaceAfter),
    intervalMs,
    timeoutMs,
  };
}

/** `--events-max-count` and `--events-max-age`: what the fleet's event stream keeps. */
function eventRetention(flags: ServerFlags): AppConfig['events'] {
  const maxAgeMs = positiveDuration('--events-max-age', flags.eventsMaxAge);
  if (maxAgeMs < 60_000 || maxAgeMs > 90 * 86_400_000)
    throw new ConfigError('--events-max-age', `expected a duration from 1m to 2160h (90 days) such as 24h, got "${flags.eventsMaxAge}"`);
  return { maxCount: integer('--events-max-count', flags.eventsMaxCount, 100, 1_000_000), maxAgeMs };
}

/** A duration from `min` to `max` milliseconds; the message names the flag and the range (`words`). */
function boundedDuration(flag: string, text: string, min: number, max: number, words: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms < min || ms > max) throw new ConfigError(flag, `expected a duration from ${words}, got "${text}"`);
  return ms;
}

/** `--pick-*` and `--feedback-*`: sessions, the member cache, blocks, the replacement rule and the feedback rate limit. */
function pickSettings(flags: ServerFlags): NonNullable<AppConfig['picks']> {
  const d = SERVER_FLAG_DEFAULTS;
  const rateText = flags.feedbackRate ?? d.feedbackRate;
  const rate = Number(rateText);
  if (rateText.trim() === '' || !Number.isFinite(rate) || rate < 0.01 || rate > 10_000)
    throw new ConfigError('--feedback-rate', `expected reports per second from 0.01 to 10000 (such as 20 or 0.5), got "${rateText}"`);
  return {
    sessionTtlMs: boundedDuration('--pick-session-ttl', flags.pickSessionTtl ?? d.pickSessionTtl, 10_000, 7 * 86_400_000, '10s to 168h such as 30m'),
    memberCacheMs: boundedDuration('--pick-cache', flags.pickCache ?? d.pickCache, 0, 10_000, '0 to 10s such as 1s'),
    blockCooldownMs: boundedDuration(
      '--feedback-block-cooldown',
      flags.feedbackBlockCooldown ?? d.feedbackBlockCooldown,
      1000,
      7 * 86_400_000,
      '1s to 168h such as 30m',
    ),
    replaceDomains: integer('--feedback-replace-domains', flags.feedbackReplaceDomains ?? d.feedbackReplaceDomains, 1, 1000),
    replaceWindowMs: boundedDuration(
      '--feedback-replace-window',
      flags.feedbackReplaceWindow ?? d.feedbackReplaceWindow,
      1000,
      7 * 86_400_000,
      '1s to 168h such as 10m',
    ),
    feedbackRate: rate,
    feedbackBurst: integer('--feedback-burst', flags.feedbackBurst ?? d.feedbackBurst, 1, 100_000),
  };
}

/** `host:port,host:port,…` (IPv6 as `[::1]:7000`) of `--redis-cluster-nodes`. */
function parseClusterNodes(text: string): { host: string; port: number }[] {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new ConfigError('--redis-cluster-nodes', 'expected host:port,… (at least one node)');
  return items.map((item) => {
    const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]/@]+):(\d{1,5})$/.exec(item);
    const port = Number(m?.[2]);
    if (!m?.[1] || !Number.isInteger(port) || port < 1 || port > 65535) {
      throw new ConfigError('--redis-cluster-nodes', `expected host:port (port 1-65535, IPv6 as [::1]:7000), got "${item}"`);
    }
    return { host: m[1].replace(/^\[|\]$/g, ''), port };
  });
}

async function readFlagFile(flag: string, file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(flag, `cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** The password in `--redis-password-file`: the whole file but one trailing line break. */
async function readRedisPassword(file: string): Promise<string> {
  const password = (await readFlagFile('--redis-password-file', file)).replace(/\r?\n$/, '');
  if (password === '') throw new ConfigError('--redis-password-file', `${file} is empty: it must hold the password`);
  if (/[\r\n]/.test(password)) throw new ConfigError('--redis-password-file', `${file} must hold the password on one line`);
  return password;
}

/** The PEM certificates in `--redis-ca-file`, checked to parse as X.509. */
async function readRedisCa(file: string): Promise<string> {
  const pem = await readFlagFile('--redis-ca-file', file);
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new ConfigError('--redis-ca-file', `${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (err) {
      throw new ConfigError('--redis-ca-file', `${file} holds a certificate that does not parse: ${(err as Error).message}`, { cause: err });
    }
  }
  return pem;
}

/**
 * Where the roles' Redis is: one server (`--redis-url`), a cluster (`--redis-cluster-nodes`), or
 * neither (`egress up` starts its own). A password file and a CA file complete either.
 */
async function parseRedisSettings(flags: ServerFlags): Promise<RedisSettings> {
  let url = parseRedisUrl(flags.redisUrl);
  const nodes = flags.redisClusterNodes === undefined || flags.redisClusterNodes === '' ? undefined : parseClusterNodes(flags.redisClusterNodes);
  if (url !== undefined && nodes !== undefined) {
    throw new ConfigError('--redis-cluster-nodes', 'give either --redis-url (REDIS_URL) or --redis-cluster-nodes (REDIS_CLUSTER_NODES), not both');
  }
  const tlsUrl = url !== undefined && new URL(url).protocol === 'rediss:';
  if (flags.redisTls && url !== undefined && !tlsUrl) throw new ConfigError('--redis-tls', 'a redis:// URL is plain TCP: use rediss:// for TLS');
  if (flags.redisTls && url === undefined && nodes === undefined)
    throw new ConfigError('--redis-tls', 'applies to --redis-url or --redis-cluster-nodes; the private redis-server speaks plain TCP on loopback');
  const ca = flags.redisCaFile ? await readRedisCa(flags.redisCaFile) : undefined;
  if (ca !== undefined && url !== undefined && !tlsUrl)
    throw new ConfigError('--redis-ca-file', 'a redis:// URL is plain TCP: use rediss:// to verify the server with this CA');
  if (ca !== undefined && url === undefined && nodes === undefined)
    throw new ConfigError(
      '--redis-ca-file',
      'applies to --redis-url (rediss://) or --redis-cluster-nodes; the private redis-server speaks plain TCP on loopback',
    );
  const password = flags.redisPasswordFile ? await readRedisPassword(flags.redisPasswordFile) : undefined;
  if (password !== undefined && url === undefined && nodes === undefined)
    throw new ConfigError('--redis-password-file', 'applies to --redis-url or --redis-cluster-nodes; the private redis-server makes its own password');
  if (password !== undefined && url !== undefined) {
    const u = new URL(url);
    if (u.password !== '') throw new ConfigError('--redis-password-file', 'REDIS_URL already carries a password: give it in one place');
    u.password = encodeURIComponent(password);
    url = u.toString();
  }
  return {
    url,
    ...(nodes ? { clusterNodes: nodes, clusterTls: flags.redisTls === true || ca !== undefined, ...(password === undefined ? {} : { password }) } : {}),
    ...(ca === undefined ? {} : { ca }),
    prefix: flags.prefix,
  };
}

/**
 * Turns flags (and the configuration file they name) into the frozen AppConfig. Everything is
 * validated here, before any connection is made: the check flags first, as the seed requires.
 */
export async function buildServerConfig(flags: ServerFlags, options: { defaultProviders: boolean; servesApi: boolean }): Promise<AppConfig> {
  const checks = resolveCheckSchedule(flags.providerCheckInterval, flags.providerCheckTimeout);
  const port = integer('--port', flags.port, 0, 65535);
  if (!LOG_LEVELS.includes(flags.logLevel)) throw new ConfigError('--log-level', `expected one of ${LOG_LEVELS.join(', ')}, got "${flags.logLevel}"`);
  if (!/^\{[^{}]+\}/.test(flags.prefix))
    throw new ConfigError('--prefix', `must start with a hash tag such as {egress} so that Redis Cluster keeps every key in one slot, got "${flags.prefix}"`);
  const noAuth = flags.auth === false;
  if (noAuth && flags.apiTokenFile) throw new ConfigError('--no-auth', 'contradicts --api-token-file: give one of them');
  if (noAuth && !isLoopback(flags.host))
    throw new ConfigError('--no-auth', `only on a loopback bind: --host ${flags.host} would open the API to the network without a token`);
  const {
    tokens,
    names: tokenNames,
    warning: tokenFileWarning,
  } = flags.apiTokenFile ? await readTokens(flags.apiTokenFile, flags.allowOpenTokenFile === true) : { tokens: [], names: [], warning: undefined };
  if (options.servesApi && !isLoopback(flags.host) && tokens.length === 0) {
    throw new ConfigError('--host', `binding ${flags.host} (not loopback) requires --api-token-file`);
  }
  // An API without --api-token-file or --no-auth requires the data directory's own token (made at start).
  const localTokenFile = options.servesApi && tokens.length === 0 && !noAuth ? join(resolve(flags.dataDir), LOCAL_TOKEN_FILE) : undefined;
  const metricsPort = flags.metricsPort === undefined ? undefined : integer('--metrics-port', flags.metricsPort, 0, 65535);
  if (!options.servesApi && metricsPort !== undefined && !isLoopback(flags.host) && tokens.length === 0) {
    throw new ConfigError('--host', `binding the --metrics-port listener on ${flags.host} (not loopback) requires --api-token-file`);
  }
  const file = flags.config ? await loadConfigFile(flags.config) : options.defaultProviders ? DEFAULT_CONFIG_FILE : { providers: [] };
  const config: AppConfig = {
    providers: file.providers,
    store: await parseStoreSettings({ ...flags, store: flags.store ?? SERVER_FLAG_DEFAULTS.store }),
    checks,
    redis: await parseRedisSettings(flags),
    api: {
      host: flags.host,
      port,
      tokens,
      tokenNames,
      maxBodyBytes: parseMaxBody(flags.maxBodySize),
      maxConnections: integer('--max-connections', flags.maxConnections, 16, 1_000_000),
      maxConnectionsPerPeer: integer('--max-connections-per-peer', flags.maxConnectionsPerPeer, 1, 1_000_000),
      allowedHosts: parseAllowedHosts(flags.allowedHost ?? []),
      ...(localTokenFile ? { localTokenFile } : {}),
      ...(noAuth ? { noAuth: true } : {}),
      ...(flags.allowOpenTokenFile ? { allowOpenTokenFile: true } : {}),
      ...(tokenFileWarning ? { tokenFileWarning } : {}),
    },
    echoUrl: flags.echoUrl === undefined ? undefined : parseHttpUrl('--echo-url', flags.echoUrl),
    recheckMs: 2000,
    resyncMs: nonNegativeDuration('--resync-interval', flags.resyncInterval),
    readiness: readinessSettings(flags),
    gcIntervalMs: nonNegativeDuration('--gc-interval', flags.gcInterval),
    gcGraceMs: nonNegativeDuration('--gc-grace', flags.gcGrace),
    gcDeletesPerSecond: deleteRate('--gc-deletes-per-second', flags.gcDeletesPerSecond),
    metricsPort,
    worker: {
      queues: parseQueues(flags.queues),
      concurrency: integer('--concurrency', flags.concurrency, 1, 1000),
      lockDurationMs: positiveDuration('--lock-duration', flags.lockDuration),
      stalledIntervalMs: positiveDuration('--stalled-interval', flags.stalledInterval),
    },
    dataDir: resolve(flags.dataDir),
    logLevel: flags.logLevel,
    shutdownGraceMs: positiveDuration('--shutdown-grace', flags.shutdownGrace),
    leaseMs: positiveDuration('--lease', flags.lease),
    backoffMs: 1000,
    retention: { completed: 1000, failed: 5000 },
    events: eventRetention(flags),
    picks: pickSettings(flags),
    telemetry: telemetryFromEnv(flags.otelEnv ?? {}),
  };
  return freezeConfig(config);
}
