import { createHash } from 'node:crypto';
import type { RedisClient } from '../redis/connections.ts';

/**
 * A Lua script run with EVALSHA (one round trip carrying only its arguments), loaded with EVAL
 * the first time a server answers NOSCRIPT (a restart, a failover, a new cluster node).
 */
export class LuaScript {
  readonly #sha: string;
  constructor(
    readonly source: string,
    readonly numberOfKeys: number,
  ) {
    this.#sha = createHash('sha1').update(source).digest('hex');
  }

  async run(redis: RedisClient, keys: readonly string[], args: readonly (string | number)[], signal?: AbortSignal): Promise<unknown> {
    signal?.throwIfAborted();
    if (keys.length !== this.numberOfKeys) throw new Error(`script expects ${this.numberOfKeys} keys, got ${keys.length}`);
    try {
      return await redis.evalsha(this.#sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}

/** Milliseconds of the Redis server's clock: every API replica judges expiries by the same clock. */
export const LUA_NOW_MS = `local function now_ms() local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end`;
