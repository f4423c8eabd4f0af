/**
 * The rules that hold between server flags, checked after each flag passed alone (server-flags.ts)
 * and before any file they name is read: who may reach the API and the metrics listener without a
 * token, how the Redis connection is secured, and how a probe fits its interval. Each refusal is a
 * ConfigError naming the flag to change.
 */
import { isIP } from 'node:net';
import { ConfigError } from '../errors.ts';
import type { ParsedFlags } from './server-flags.ts';

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/**
 * `--no-auth` only alone and on loopback; a non-loopback API, or (in a role without the API) a
 * non-loopback metrics listener, only with `--api-token-file`.
 */
export function checkAccessRules(flags: ParsedFlags, servesApi: boolean): void {
  const noAuth = flags.auth === false;
  const withTokens = Boolean(flags.apiTokenFile);
  if (noAuth && withTokens) throw new ConfigError('--no-auth', 'contradicts --api-token-file: give one of them');
  if (noAuth && !isLoopback(flags.host))
    throw new ConfigError('--no-auth', `only on a loopback bind: --host ${flags.host} would open the API to the network without a token`);
  if (servesApi && !isLoopback(flags.host) && !withTokens) {
    throw new ConfigError('--host', `binding ${flags.host} (not loopback) requires --api-token-file`);
  }
  if (!servesApi && flags.metricsPort !== undefined && !isLoopback(flags.host) && !withTokens) {
    throw new ConfigError('--host', `binding the --metrics-port listener on ${flags.host} (not loopback) requires --api-token-file`);
  }
}

/**
 * One Redis server (`--redis-url`) or a cluster (`--redis-cluster-nodes`), not both; TLS and a CA
 * only where the connection can use them (a redis:// URL is plain TCP, the private redis-server is
 * plain TCP on loopback); a password file only for a Redis of the user's, and not beside one in the URL.
 */
export function checkRedisRules(flags: ParsedFlags): void {
  const url = flags.redisUrl;
  const nodes = flags.redisClusterNodes;
  if (url !== undefined && nodes !== undefined) {
    throw new ConfigError('--redis-cluster-nodes', 'give either --redis-url (REDIS_URL) or --redis-cluster-nodes (REDIS_CLUSTER_NODES), not both');
  }
  const plainUrl = url !== undefined && new URL(url).protocol !== 'rediss:';
  const privateRedis = url === undefined && nodes === undefined;
  if (flags.redisTls && plainUrl) throw new ConfigError('--redis-tls', 'a redis:// URL is plain TCP: use rediss:// for TLS');
  if (flags.redisTls && privateRedis)
    throw new ConfigError('--redis-tls', 'applies to --redis-url or --redis-cluster-nodes; the private redis-server speaks plain TCP on loopback');
  if (flags.redisCaFile && plainUrl) throw new ConfigError('--redis-ca-file', 'a redis:// URL is plain TCP: use rediss:// to verify the server with this CA');
  if (flags.redisCaFile && privateRedis)
    throw new ConfigError(
      '--redis-ca-file',
      'applies to --redis-url (rediss://) or --redis-cluster-nodes; the private redis-server speaks plain TCP on loopback',
    );
  if (flags.redisPasswordFile && privateRedis)
    throw new ConfigError('--redis-password-file', 'applies to --redis-url or --redis-cluster-nodes; the private redis-server makes its own password');
  if (flags.redisPasswordFile && url !== undefined && new URL(url).password !== '')
    throw new ConfigError('--redis-password-file', 'REDIS_URL already carries a password: give it in one place');
}

/** Each readiness probe has two steps under `--probe-timeout`: both must fit in `--probe-interval`. */
export function checkProbeRules(flags: ParsedFlags): void {
  const { probeInterval: interval, probeTimeout: timeout } = flags;
  if (interval.ms > 0 && timeout.ms * 2 > interval.ms) {
    throw new ConfigError(
      '--probe-timeout',
      `must be at most half of --probe-interval (${interval.text}): a probe has two steps under it, got "${timeout.text}"`,
    );
  }
}
