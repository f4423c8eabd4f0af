import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../redis/connections.ts';
import type { ProbeClaims } from './probe-claims.ts';

/**
 * Probe claims a fleet's workers share in Redis: `SET <prefix>:probe-claim:<proxy> <claimant> NX PX`
 * for each proxy, one pipelined round trip per call. Each instance is one claimant.
 */
export class RedisProbeClaims implements ProbeClaims {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #claimant = randomUUID();

  constructor(redis: RedisClient, prefix: string) {
    this.#redis = redis;
    this.#prefix = prefix;
  }

  async claim(names: readonly string[], ttlMs: number): Promise<boolean[]> {
    const px = Math.max(1, Math.floor(ttlMs));
    const pipeline = this.#redis.pipeline();
    for (const name of names) pipeline.set(`${this.#prefix}:probe-claim:${name}`, this.#claimant, 'PX', px, 'NX');
    const replies = (await pipeline.exec()) ?? [];
    return names.map((_, i) => replies[i]?.[1] === 'OK');
  }
}
