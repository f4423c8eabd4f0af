import { Redis } from 'ioredis';
import { expect, inject, test } from 'vitest';

test('the run has its own redis-server with noeviction', async () => {
  const redis = new Redis(inject('redisUrl'), { lazyConnect: true });
  await redis.connect();
  const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as [string, string];
  expect(policy).toBe('noeviction');
  expect(inject('redisUrl')).not.toMatch(/:6379$/);
  await redis.quit();
});
