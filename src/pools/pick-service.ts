import { EgressError, NotFoundError } from '../errors.ts';
import type { RedisClient } from '../redis/connections.ts';
import type { PickableMember, PoolMemberCache } from './pick-members.ts';
import type { PickKeys } from './pick-keys.ts';
import { LUA_NOW_MS, LuaScript } from './pick-script.ts';

/** How a pick went: the session kept its member, a new session (or none) got one, or a session moved. */
export type PickOutcome = 'kept' | 'new' | 'moved';
/** Why no member could be picked. */
export type NoMemberReason = 'none-ready' | 'all-blocked';

/** No member of the pool can be handed out now: answered 503 with the reason. */
export class NoEligibleMemberError extends EgressError {
  constructor(
    readonly pool: string,
    readonly reason: NoMemberReason,
    domain: string | undefined,
  ) {
    super(
      'ERR_POOL_NO_MEMBER',
      reason === 'none-ready'
        ? `pool "${pool}" has no Ready member`
        : `every Ready member of pool "${pool}" is blocked for ${domain ?? 'this domain'} (reported through feedback; blocks end after --feedback-block-cooldown)`,
      { retryable: true },
    );
  }
}

/** Counts picks per pool and result (kept, new, moved, none-ready, all-blocked). */
export interface PickCounter {
  picked(pool: string, result: PickOutcome | NoMemberReason): void;
}

export interface PickRequest {
  session?: string | undefined;
  /** Normalised host name: members blocked for it are skipped. */
  domain?: string | undefined;
}

export interface Pick {
  pool: string;
  member: PickableMember;
  outcome: PickOutcome;
  /** The session and how long it lives without another pick. */
  session?: { id: string; ttlMs: number };
}

/**
 * The choice, atomic in Redis so that two API replicas never split a session. KEYS: the pool's
 * round-robin sorted set, the session's key, the pool's blocked set for the domain (names of keys
 * nobody writes when there is no session or domain). ARGV: has-session, has-domain, session TTL
 * (ms), then the Ready members.
 *
 * A session keeps its member while the member is among the Ready ones and not blocked for the
 * domain (its TTL renewed); otherwise the least recently picked eligible member is chosen (ties:
 * by name) and the session bound to it. Every pick moves the member to the back of the round
 * robin, sticky ones included, so new sessions go to the least used members.
 */
const PICK = new LuaScript(
  `${LUA_NOW_MS}
local has_session = ARGV[1] == '1'
local has_domain = ARGV[2] == '1'
local ttl = tonumber(ARGV[3])
local first = 4
if #ARGV < first then return {'', 'none-ready'} end
local ready = {}
for i = first, #ARGV do ready[ARGV[i]] = true end
local blocked = {}
if has_domain then
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  for _, m in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do blocked[m] = true end
end
local function bump(m)
  local top = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local seq = (top[2] and tonumber(top[2]) or 0) + 1
  redis.call('ZADD', KEYS[1], seq, m)
  redis.call('PEXPIRE', KEYS[1], 86400000)
end
local previous = false
if has_session then
  previous = redis.call('GET', KEYS[2])
  if previous and ready[previous] and not blocked[previous] then
    redis.call('PEXPIRE', KEYS[2], ttl)
    bump(previous)
    return {previous, 'kept'}
  end
end
local rows = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local scores = {}
for i = 1, #rows, 2 do scores[rows[i]] = tonumber(rows[i + 1]) end
local best, best_score = nil, nil
for i = first, #ARGV do
  local m = ARGV[i]
  if not blocked[m] then
    local s = scores[m] or 0
    if best == nil or s < best_score then best, best_score = m, s end
  end
end
if best == nil then return {'', 'all-blocked'} end
if #rows / 2 > 2 * (#ARGV - first + 1) + 16 then
  for i = 1, #rows, 2 do if not ready[rows[i]] then redis.call('ZREM', KEYS[1], rows[i]) end end
end
bump(best)
if has_session then redis.call('SET', KEYS[2], best, 'PX', ttl) end
if previous then return {best, 'moved'} end
return {best, 'new'}`,
  3,
);

export interface PoolPickerDeps {
  redis: RedisClient;
  keys: PickKeys;
  members: PoolMemberCache;
  sessionTtlMs: number;
  counter: PickCounter;
}

/** `GET /v1/pools/{name}/pick`: one Ready member per call, sticky per session, round-robin otherwise. */
export class PoolPicker {
  readonly #deps: PoolPickerDeps;
  constructor(deps: PoolPickerDeps) {
    this.#deps = deps;
  }

  /** NotFoundError for an unknown pool (or one being deleted); NoEligibleMemberError when none can be picked. */
  async pick(pool: string, request: PickRequest, signal?: AbortSignal): Promise<Pick> {
    const { redis, keys, members, sessionTtlMs, counter } = this.#deps;
    const snapshot = await members.get(pool, signal);
    if (!snapshot) throw new NotFoundError('pool', pool);
    const reply = (await PICK.run(
      redis,
      [keys.lru(pool), keys.session(pool, request.session ?? ''), keys.blocked(pool, request.domain ?? '')],
      [request.session ? '1' : '0', request.domain ? '1' : '0', sessionTtlMs, ...snapshot.members.map((m) => m.name)],
      signal,
    )) as [string, string];
    const [name, result] = reply;
    if (result === 'none-ready' || result === 'all-blocked') {
      counter.picked(pool, result);
      throw new NoEligibleMemberError(pool, result, request.domain);
    }
    const member = snapshot.members.find((m) => m.name === name);
    if (!member) throw new Error(`pick script chose "${name}", not a member it was given`);
    const outcome = result as PickOutcome;
    counter.picked(pool, outcome);
    return { pool, member, outcome, ...(request.session ? { session: { id: request.session, ttlMs: sessionTtlMs } } : {}) };
  }

  /** The member a session holds now (for feedback through the pool), or undefined when it has none; NotFoundError for an unknown pool. */
  async memberOf(pool: string, session: string, signal?: AbortSignal): Promise<string | undefined> {
    if (!(await this.#deps.members.get(pool, signal))) throw new NotFoundError('pool', pool);
    signal?.throwIfAborted();
    return (await this.#deps.redis.get(this.#deps.keys.session(pool, session))) ?? undefined;
  }
}
