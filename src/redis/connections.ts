import type { Cluster, Redis } from 'ioredis';
import { createRedisClient, redisOptions, type RedisTarget } from '../../queues/connection.ts';
import type { RedisSettings } from '../config/app.ts';
import type { Logger } from '../logging.ts';

/** Our own connection to Redis: one server, or a Redis Cluster (every key of ours is in one slot). */
export type RedisClient = Redis | Cluster;

/** A plain ioredis client of the given kind; the caller owns it and must `quit()` it. */
export function createRedis(target: RedisTarget | string, kind: 'worker' | 'producer', logger: Logger): RedisClient {
  const redis = createRedisClient(redisOptions(target, kind));
  redis.on('error', (err: NodeJS.ErrnoException) => {
    const hint = certificateHint(err);
    logger.warn({ err: err.message, ...(hint ? { hint } : {}) }, 'redis connection error');
  });
  return redis;
}

const CERTIFICATE_ERRORS =
  /^(SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_[A-Z_]+|ERR_TLS_CERT_ALTNAME_INVALID)$/;

/** What to do about a TLS error that says the server's certificate is not trusted. */
function certificateHint(err: NodeJS.ErrnoException): string | undefined {
  if (err.code === undefined || !CERTIFICATE_ERRORS.test(err.code)) return undefined;
  return err.code === 'ERR_TLS_CERT_ALTNAME_INVALID'
    ? 'the Redis server’s TLS certificate does not name the host connected to: connect by a name it carries'
    : 'the Redis server’s TLS certificate is not trusted: give the CA that signed it with --redis-ca-file (REDIS_CA_FILE)';
}

/** Closes a client politely, or drops it when Redis is gone. */
export async function closeRedis(redis: RedisClient): Promise<void> {
  if (redis.status === 'end') return;
  try {
    await Promise.race([redis.quit(), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
  } catch {
    // quit fails when the connection is already down; disconnect below ends it either way.
  }
  redis.disconnect();
}

/** Warns when Redis may evict keys: BullMQ needs `maxmemory-policy noeviction`. */
export async function warnUnlessNoEviction(redis: RedisClient, logger: Logger): Promise<void> {
  try {
    // On a cluster this asks one node (our keys all live on one master at a time; every node
    // should be configured alike).
    const reply = (await redis.config('GET', 'maxmemory-policy')) as string[];
    const policy = reply[1];
    if (policy !== undefined && policy !== 'noeviction') {
      logger.warn({ policy }, 'Redis maxmemory-policy is not noeviction: queued jobs may be evicted and lost; set maxmemory-policy noeviction');
    }
  } catch (err) {
    logger.debug({ err: (err as Error).message }, 'could not read maxmemory-policy (CONFIG may be disabled)');
  }
}

/**
 * The target the roles connect to: the configured cluster, or one server at `url` (the configured
 * one, or the private redis-server's), with the configured CA.
 */
export function redisTargetOf(settings: RedisSettings, url: string | undefined): RedisTarget {
  if (settings.clusterNodes !== undefined) {
    return {
      kind: 'cluster',
      nodes: settings.clusterNodes,
      tls: settings.clusterTls === true,
      ...(settings.password === undefined ? {} : { password: settings.password }),
      ...(settings.ca === undefined ? {} : { ca: settings.ca }),
    };
  }
  if (url === undefined) throw new Error('redisTargetOf: no URL and no cluster');
  return { kind: 'standalone', url, ...(settings.ca === undefined ? {} : { ca: settings.ca }) };
}

/** The Redis listeners of a target (the seed nodes of a cluster), for the proxies' egress guards. */
export function redisListeners(target: RedisTarget): { host: string; port: number }[] {
  if (target.kind === 'cluster') return target.nodes.map((n) => ({ host: n.host, port: n.port }));
  const u = new URL(target.url);
  return [{ host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 6379) }];
}
