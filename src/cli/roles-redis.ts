import type { AppConfig } from '../config/app.ts';
import type { Logger } from '../logging.ts';
import { closeRedis, createRedis, redisTargetOf, warnUnlessNoEviction, type RedisClient } from '../redis/connections.ts';
import { startPrivateRedis } from '../redis/private-redis.ts';
import { privateRedisLost, watchRedisOutage } from '../redis/redis-lost.ts';
import type { ProcessEnd } from '../roles/process-end.ts';
import { boundedStep } from '../roles/role-lifecycle.ts';
import type { ShutdownPlan } from '../roles/shutdown-plan.ts';
import type { SecretRegistry } from '../secrets/secret-registry.ts';
import type { RedisTarget } from '../../queues/connection.ts';

/** How long closing the Redis connection may take. */
const CLOSE_MS = 5000;

export interface RolesRedis {
  /** The standalone Redis the roles use (the private one's URL carries its password); undefined on a cluster. */
  readonly url: string | undefined;
  readonly target: RedisTarget;
  /** The process's own connection (stores, events, the scheduler's lease); BullMQ opens its own. */
  readonly client: RedisClient;
}

export interface RolesRedisOptions {
  /** Tests start the private Redis without the parent-death signal, to leave an orphan behind. */
  privateRedis?: { dieWithOwner?: boolean };
}

/** Tells the registry the secrets a process's configuration holds: the API tokens and the Redis password. */
function registerConfigSecrets(secrets: SecretRegistry, config: AppConfig, target: RedisTarget): void {
  secrets.set('api-tokens', config.api.tokens);
  const redisPassword = (): string | undefined => {
    if (target.kind === 'cluster') return target.password;
    const u = new URL(target.url);
    return u.password ? decodeURIComponent(u.password) : undefined;
  };
  secrets.set('redis', [redisPassword(), config.redis.password]);
}

/** Where the process's Redis is, for messages: never with its password. */
function whereOf(target: RedisTarget): string {
  if (target.kind === 'cluster') return `the cluster ${target.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`;
  const u = new URL(target.url);
  return `${u.hostname}:${u.port || 6379}`;
}

/**
 * The Redis of a process's roles: the configured one, or `egress up`'s private redis-server
 * (started here, closed last). Either way, losing it ends the process through `end`: the private
 * server exiting at once, any Redis unreachable for longer than `--redis-lost-after`.
 */
export async function connectRolesRedis(
  config: AppConfig,
  logger: Logger,
  secrets: SecretRegistry,
  plan: ShutdownPlan,
  end: ProcessEnd,
  options: RolesRedisOptions = {},
): Promise<RolesRedis> {
  let url = config.redis.url;
  if (url === undefined && config.redis.clusterNodes === undefined) {
    const own = await startPrivateRedis({
      dataDir: config.dataDir,
      command: process.argv.slice(1).join(' '),
      logger: logger.child({ component: 'private-redis' }),
      ...options.privateRedis,
    });
    plan.add(() => own.close());
    void own.exited.then(({ code, signal }) => {
      if (end.settled) return;
      const err = privateRedisLost(own.pid, signal ? `was killed by ${signal}` : `exited with code ${code}`);
      logger.error({ redisPid: own.pid, code, signal }, err.message);
      end.fail(err);
    });
    // The URL carries the password: every connection of this process uses it, no log line shows it.
    url = own.url;
    logger.info({ url: own.displayUrl, redisPid: own.pid, dir: own.dir, diesWithOwner: own.diesWithOwner }, 'started a private redis-server');
    if (!own.diesWithOwner) {
      logger.warn(
        'setpriv --pdeathsig is not available: if this process is killed with -9, its redis-server keeps running until the next start on this data directory stops it',
      );
    }
  }
  const target = redisTargetOf(config.redis, url);
  registerConfigSecrets(secrets, config, target);
  if (target.kind === 'cluster') logger.info({ nodes: target.nodes.map((n) => `${n.host}:${n.port}`), tls: target.tls }, 'using a Redis Cluster');
  const client: RedisClient = createRedis(target, 'worker', logger.child({ component: 'redis' }));
  const stopWatching = watchRedisOutage(client, {
    limitMs: config.redis.lostAfterMs ?? 0,
    where: whereOf(target),
    onLost: (err) => {
      if (end.settled) return;
      logger.error({ err: err.message }, 'Redis lost');
      end.fail(err);
    },
  });
  plan.add(
    boundedStep('the Redis connection', CLOSE_MS, async () => {
      stopWatching();
      await closeRedis(client);
    }),
  );
  await warnUnlessNoEviction(client, logger);
  return { url, target, client };
}
