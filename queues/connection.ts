import type { RedisOptions } from 'bullmq';

/** ioredis options for a Redis URL, for one of the two kinds of connection BullMQ needs. */
export function redisOptions(url: string, kind: 'worker' | 'producer'): RedisOptions {
  const u = new URL(url);
  const base: RedisOptions = {
    host: u.hostname,
    port: Number(u.port || 6379),
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db: u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0,
      tls: u.protocol === 'rediss:' ? {} : undefined,
    retryStrategy: (times) => Math.max(Math.min(Math.exp(times), 20_000), 1000),
  };
  // Workers block on Redis and must never give up a command; producers fail fast so that an
  // API call or a CLI command reports Redis being down instead of hanging.
  return kind === 'worker'
    ? { ...base, maxRetriesPerRequest: null }
    : { ...base, maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 5000 };
}
