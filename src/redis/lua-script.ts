import { createHash } from 'node:crypto';
import type { RedisClient } from './connections.ts';
import { isTooLateReply, luaFence, writeNotAfter, WriteTooLateError } from './write-fence.ts';

/**
 * A Lua script run with EVALSHA (one round trip carrying only its arguments), loaded with EVAL
 * the first time a server answers NOSCRIPT (a restart, a failover, a new cluster node).
 *
 * A `fenced` script (one that writes on a caller's behalf) also gets the fence of the caller's
 * signal as its last argument (src/redis/write-fence.ts): Redis refuses to run it once that time
 * has passed, and `run` rejects with WriteTooLateError, so a report whose request was answered 503
 * during a stall is not recorded when Redis resumes.
 */
export class LuaScript {
  readonly #sha: string;
  readonly source: string;
  constructor(
    body: string,
    readonly numberOfKeys: number,
    readonly options: { fenced?: { what: string } } = {},
  ) {
    this.source = options.fenced ? `${luaFence('ARGV[#ARGV]')}${body}` : body;
    this.#sha = createHash('sha1').update(this.source).digest('hex');
  }

  async run(redis: RedisClient, keys: readonly string[], args: readonly (string | number)[], signal?: AbortSignal): Promise<unknown> {
    signal?.throwIfAborted();
    if (keys.length !== this.numberOfKeys) throw new Error(`script expects ${this.numberOfKeys} keys, got ${keys.length}`);
    const all = this.options.fenced ? [...args, writeNotAfter(signal)] : args;
    try {
      try {
        return await redis.evalsha(this.#sha, keys.length, ...keys, ...all);
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
        return await redis.eval(this.source, keys.length, ...keys, ...all);
      }
    } catch (err) {
      if (this.options.fenced && isTooLateReply(err)) throw new WriteTooLateError(this.options.fenced.what);
      throw err;
    }
  }
}
