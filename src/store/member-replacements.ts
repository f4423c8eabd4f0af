import type { RedisClient } from '../redis/connections.ts';
import { isTooLateReply, luaFence, writeNotAfter, WriteTooLateError } from '../redis/write-fence.ts';

/** Why a member is to be replaced and since when. */
export interface ReplacementRequest {
  /** Shown in events and logs, such as `blocked on 3 domains within 10m`. */
  reason: string;
  requestedAt: string;
}

/**
 * Requests to replace pool members before their time: ban feedback writes them, the pool
 * reconcile honours them (surge-first, like a member past `maxAge`) and clears them once the
 * member is gone. Kept in Redis whatever the object store is, beside the feedback state.
 */
export interface MemberReplacements {
  /** Records the request; resolves false when the member was already asked to be replaced. */
  request(pool: string, member: string, reason: string, signal?: AbortSignal): Promise<boolean>;
  list(pool: string, signal?: AbortSignal): Promise<Map<string, ReplacementRequest>>;
  clear(pool: string, members: readonly string[], signal?: AbortSignal): Promise<void>;
}

/** HSETNX behind the caller's write fence (ARGV[3]; src/redis/write-fence.ts): KEYS[1] the pool's hash, ARGV[1] the member, ARGV[2] the request. */
const REQUEST = `${luaFence('ARGV[3]')}return redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])`;

/** One hash per pool, `<prefix>:pool-replace:<pool>`: member → JSON ReplacementRequest. */
export class RedisMemberReplacements implements MemberReplacements {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #now: () => Date;

  constructor(redis: RedisClient, prefix: string, now: () => Date = () => new Date()) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#now = now;
  }

  #key(pool: string): string {
    return `${this.#prefix}:pool-replace:${pool}`;
  }

  async request(pool: string, member: string, reason: string, signal?: AbortSignal): Promise<boolean> {
    signal?.throwIfAborted();
    const entry: ReplacementRequest = { reason, requestedAt: this.#now().toISOString() };
    try {
      return (await this.#redis.eval(REQUEST, 1, this.#key(pool), member, JSON.stringify(entry), writeNotAfter(signal))) === 1;
    } catch (err) {
      if (isTooLateReply(err)) throw new WriteTooLateError(`the replacement request of member "${member}"`);
      throw err;
    }
  }

  async list(pool: string, signal?: AbortSignal): Promise<Map<string, ReplacementRequest>> {
    signal?.throwIfAborted();
    const all = await this.#redis.hgetall(this.#key(pool));
    return new Map(Object.entries(all).map(([member, text]) => [member, JSON.parse(text) as ReplacementRequest]));
  }

  async clear(pool: string, members: readonly string[], signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (members.length > 0) await this.#redis.hdel(this.#key(pool), ...members);
  }
}
