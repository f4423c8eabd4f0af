import type { RedisClient } from '../redis/connections.ts';

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
    return (await this.#redis.hsetnx(this.#key(pool), member, JSON.stringify(entry))) === 1;
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
