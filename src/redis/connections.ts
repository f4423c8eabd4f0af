import { Redis } from 'ioredis';
import { redisOptions } from '../../queues/connection.ts';
import type { Logger } from '../logging.ts';

/** A plain ioredis client of the given kind; the caller owns it and must `quit()` it. */
export function createRedis(url: string, kind: 'worker' | 'producer', logger: Logger): Redis {
  const redis = new Redis(redisOptions(url, kind));
  redis.on('error', (err: Error) => logger.warn({ err: err.message }, 'redis connection error'));
  return redis;
}

/** Closes a client politely, or drops it when Redis is gone. */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  try {
    await Promise.race([redis.quit(), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
  } catch {
    // quit fails when the connection is already down; disconnect below ends it either way.
  }
  redis.disconnect();
}

/** Warns when Redis may evict keys: BullMQ needs `maxmemory-policy noeviction`. */
export async function warnUnlessNoEviction(redis: Redis, logger: Logger): Promise<void> {
  try {
    const reply = (await redis.config('GET', 'maxmemory-policy')) as string[];
    const policy = reply[1];
    if (policy !== undefined && policy !== 'noeviction') {
      logger.warn({ policy }, 'Redis maxmemory-policy is not noeviction: queued jobs may be evicted and lost; set maxmemory-policy noeviction');
    }
  } catch (err) {
    logger.debug({ err: (err as Error).message }, 'could not read maxmemory-policy (CONFIG may be disabled)');
  }
}
