import { EgressError, NotFoundError } from '../errors.ts';
import type { RedisClient } from '../redis/connections.ts';
import type { PickableMember, PoolMemberCache } from './pick-members.ts';
import type { PickKeys } from './pick-keys.ts';
import { LUA_NOW_MS, LuaScript } from './pick-script.ts';
import { tiersOf, tierView } from './pick-tiers.ts';
import { BudgetExhaustedError, spentBudget, type SpentBudget } from './pick-budget.ts';

/** How a pick went: the session kept its member, a new session (or none) got one, or a session moved. */
export type PickOutcome = 'kept' | 'new' | 'moved';
/** Why no member could be picked. */
export type NoMemberReason = 'none-ready' | 'all-blocked' | 'none-in-tier' | 'budget-exhausted';

/** How long a crawler is asked to wait while an empty autoscaled pool starts a member. */
export const WAKE_RETRY_AFTER_SECONDS = 5;

/**
 * No member of the pool can be handed out now: answered 503 with the reason and Retry-After
 * (`retryAfterSeconds`). `waking`: an empty autoscaled pool that this pick (or one just before it)
 * woke; `budget`: an empty pool whose spent budget keeps it from starting one until the window turns.
 */
export class NoEligibleMemberError extends EgressError {
  readonly waking: boolean;
  readonly retryAfterSeconds: number;
  constructor(
    readonly pool: string,
    readonly reason: NoMemberReason,
    domain: string | undefined,
    tier?: { name: string; present: readonly string[] },
    more: { waking?: boolean; budget?: SpentBudget } = {},
  ) {
    super('ERR_POOL_NO_MEMBER', noMemberMessage(pool, reason, domain, tier, more), { retryable: true });
    this.waking = more.waking ?? false;
    this.retryAfterSeconds = more.budget ? more.budget.retryAfterSeconds : this.waking ? WAKE_RETRY_AFTER_SECONDS : 1;
  }
}

function noMemberMessage(
  pool: string,
  reason: NoMemberReason,
  domain: string | undefined,
  tier: { name: string; present: readonly string[] } | undefined,
  more: { waking?: boolean; budget?: SpentBudget },
): string {
  if (reason === 'budget-exhausted' && more.budget)
    return `pool "${pool}" has no Ready member and its ${more.budget.limit} budget for this ${more.budget.window} is spent: it starts none until the window turns`;
  if (reason === 'none-ready')
    return more.waking
      ? `pool "${pool}" has no Ready member; one is being started (autoscale), pick again after Retry-After`
      : `pool "${pool}" has no Ready member`;
  if (reason === 'none-in-tier') {
    const present = tier?.present.length ? `Ready members are of tier ${tier.present.join(', ')}` : 'no Ready member has a tier label';
    return `pool "${pool}" has no Ready member of tier "${tier?.name ?? ''}" (${present})`;
  }
  const of = tier ? ` of tier "${tier.name}"` : '';
  return `every Ready member${of} of pool "${pool}" is blocked for ${domain ?? 'this domain'} (reported through feedback; blocks end after --feedback-block-cooldown)`;
}

/** Counts picks per pool and result (kept, new, moved, none-ready, all-blocked, none-in-tier). */
export interface PickCounter {
  picked(pool: string, result: PickOutcome | NoMemberReason): void;
}

export interface PickRequest {
  session?: string | undefined;
  /** Normalised host name: members blocked for it are skipped. */
  domain?: string | undefined;
  /** Only members whose `tier` label is this (a session holding another tier's member moves). */
  tier?: string | undefined;
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
 * round-robin sorted set (exactly its Ready members), the version of the member list that set
 * holds, the session's key, the pool's blocked set for the domain (names of keys nobody writes when
 * there is no session or domain), the pool's set of live sessions (session key → expiry), the pool's
 * demand hash (autoscale) and its spent-budget key. ARGV: has-session, has-domain, session TTL
 * (ms), the caller's member-list version, the members to skip besides the blocked ones (those of
 * another tier, one a line; empty without a tier), autoscaled (1/0), and (only when the script asked
 * for it) the member names, one a line.
 *
 * An autoscaled pool's picks are counted (and the last one's time kept, by Redis's clock), refused
 * ones included: they are demand. A spent budget with stopPicks refuses the pick (`budget`, with the
 * key's value and its time to live); an empty pool answers `none-ready` with `1` when it is to be woken
 * (at most once per 5 s), or `budget-empty` when its spent budget keeps it empty.
 *
 * When the stored version differs from the caller's, the script answers `stale` unless it was given
 * the list, in which case it makes the sorted set hold exactly those members (new ones at 0, the
 * front of the round robin; gone ones removed). Member changes cost one extra round trip and a
 * pass over the pool; every other pick is O(log n): a session keeps its member while the member is
 * in the set and not blocked for the domain (its TTL renewed); otherwise the least recently picked
 * member not blocked for the domain is chosen (ties: by name) and the session bound to it. Every
 * pick moves the member to the back of the round robin, sticky ones included, so new sessions go
 * to the least used members.
 */
const PICK = new LuaScript(
  `${LUA_NOW_MS}
local has_session = ARGV[1] == '1'
local has_domain = ARGV[2] == '1'
local ttl = tonumber(ARGV[3])
local version = ARGV[4]
local day = 86400000
if redis.call('GET', KEYS[2]) ~= version then
  if ARGV[7] == nil then return {'', 'stale'} end
  local ready = {}
  for m in string.gmatch(ARGV[7], '[^\\n]+') do
    ready[m] = true
    redis.call('ZADD', KEYS[1], 'NX', 0, m)
  end
  for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    if not ready[m] then redis.call('ZREM', KEYS[1], m) end
  end
  redis.call('SET', KEYS[2], version, 'PX', day)
end
redis.call('PEXPIRE', KEYS[1], day)
redis.call('PEXPIRE', KEYS[2], day)
local autoscaled = ARGV[6] == '1'
local t = 0
if autoscaled then
  t = now_ms()
  redis.call('HINCRBY', KEYS[6], 'picks', 1)
  redis.call('HSET', KEYS[6], 'last', t)
  redis.call('PEXPIRE', KEYS[6], 7 * day)
end
local budget = redis.call('GET', KEYS[7])
if budget and string.sub(budget, 1, 1) == '1' then return {'', 'budget', budget, redis.call('PTTL', KEYS[7])} end
if redis.call('ZCARD', KEYS[1]) == 0 then
  if budget then return {'', 'budget-empty', budget, redis.call('PTTL', KEYS[7])} end
  if autoscaled and t - tonumber(redis.call('HGET', KEYS[6], 'woke') or '0') >= 5000 then
    redis.call('HSET', KEYS[6], 'woke', t)
    return {'', 'none-ready', '1'}
  end
  return {'', 'none-ready'}
end
local blocked = {}
for m in string.gmatch(ARGV[5], '[^\\n]+') do blocked[m] = true end
if has_domain then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now_ms())
  for _, m in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do blocked[m] = true end
end
local function bump(m)
  local top = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  redis.call('ZADD', KEYS[1], tonumber(top[2]) + 1, m)
end
local previous = false
if has_session then
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  redis.call('ZADD', KEYS[5], now + ttl, KEYS[3])
  redis.call('PEXPIRE', KEYS[5], ttl)
  previous = redis.call('GET', KEYS[3])
  if previous and redis.call('ZSCORE', KEYS[1], previous) and not blocked[previous] then
    redis.call('PEXPIRE', KEYS[3], ttl)
    bump(previous)
    return {previous, 'kept'}
  end
end
local best = nil
local start = 0
while best == nil do
  local chunk = redis.call('ZRANGE', KEYS[1], start, start + 63)
  if #chunk == 0 then break end
  for _, m in ipairs(chunk) do
    if not blocked[m] then best = m break end
  end
  start = start + 64
end
if best == nil then return {'', 'all-blocked'} end
bump(best)
if has_session then redis.call('SET', KEYS[3], best, 'PX', ttl) end
if previous then return {best, 'moved'} end
return {best, 'new'}`,
  7,
);

/** The pool's sessions that have not expired, by Redis's clock. KEYS: the pool's set of live sessions. */
const LIVE_SESSIONS = new LuaScript(
  `${LUA_NOW_MS}
return redis.call('ZCOUNT', KEYS[1], '(' .. now_ms(), '+inf')`,
  1,
);

/** The script's answer: the member (or ''), the result, and for some results more (the wake flag; the budget's value and time to live). */
type PickReply = [string, string, string?, number?];

export interface PoolPickerDeps {
  redis: RedisClient;
  keys: PickKeys;
  members: PoolMemberCache;
  sessionTtlMs: number;
  counter: PickCounter;
  /** Asks for the reconcile of an empty autoscaled pool a pick found (the work-requests port's reconcilePool). */
  wake?: (pool: string) => Promise<void>;
}

/** `GET /v1/pools/{name}/pick`: one Ready member per call, sticky per session, round-robin otherwise. */
export class PoolPicker {
  readonly #deps: PoolPickerDeps;
  constructor(deps: PoolPickerDeps) {
    this.#deps = deps;
  }

  /**
   * NotFoundError for an unknown pool (or one being deleted); NoEligibleMemberError when none can be
   * picked; BudgetExhaustedError when the pool's budget is spent and says stopPicks.
   */
  async pick(pool: string, request: PickRequest, signal?: AbortSignal): Promise<Pick> {
    const { redis, keys, members, sessionTtlMs, counter } = this.#deps;
    const snapshot = await members.get(pool, signal);
    if (!snapshot) throw new NotFoundError('pool', pool);
    const tier = request.tier === undefined ? undefined : tierView(snapshot, request.tier);
    const tierWords = request.tier === undefined ? undefined : { name: request.tier, present: tiersOf(snapshot) };
    if (tier && tier.count === 0 && snapshot.members.length > 0) {
      counter.picked(pool, 'none-in-tier');
      throw new NoEligibleMemberError(pool, 'none-in-tier', request.domain, tierWords);
    }
    const keyList = [
      keys.lru(pool),
      keys.memberVersion(pool),
      keys.session(pool, request.session ?? ''),
      keys.blocked(pool, request.domain ?? ''),
      keys.sessions(pool),
      keys.demand(pool),
      keys.budget(pool),
    ];
    const autoscaled = snapshot.pool.spec.autoscale !== undefined;
    const args = [request.session ? '1' : '0', request.domain ? '1' : '0', sessionTtlMs, snapshot.version, tier?.others ?? '', autoscaled ? '1' : '0'];
    let reply = (await PICK.run(redis, keyList, args, signal)) as PickReply;
    // The stored member list is another version: send ours (a member joined or left, or another replica saw it first).
    if (reply[1] === 'stale') reply = (await PICK.run(redis, keyList, [...args, snapshot.names], signal)) as PickReply;
    const [name, result] = reply;
    if (result === 'budget') {
      counter.picked(pool, 'budget-exhausted');
      throw new BudgetExhaustedError(pool, spentBudget(reply[2], reply[3]));
    }
    if (result === 'budget-empty') {
      counter.picked(pool, 'budget-exhausted');
      throw new NoEligibleMemberError(pool, 'budget-exhausted', request.domain, tierWords, { budget: spentBudget(reply[2], reply[3]) });
    }
    if (result === 'none-ready' || result === 'all-blocked') {
      counter.picked(pool, result);
      const waking = result === 'none-ready' && autoscaled;
      // The first of a burst of picks of an empty autoscaled pool asks for its reconcile: it starts a member.
      if (waking && reply[2] === '1') await this.#deps.wake?.(pool);
      throw new NoEligibleMemberError(pool, result, request.domain, tierWords, { waking });
    }
    const member = snapshot.byName.get(name);
    if (!member) throw new Error(`pick script chose "${name}", not a member it was given`);
    const outcome = result as PickOutcome;
    counter.picked(pool, outcome);
    return { pool, member, outcome, ...(request.session ? { session: { id: request.session, ttlMs: sessionTtlMs } } : {}) };
  }

  /**
   * What a pick would answer, without picking (HEAD): the number of Ready members (of `tier` when given); NotFoundError
   * for an unknown pool. Sessions, the round-robin order and blocks are neither read nor moved.
   */
  async readyMembers(pool: string, signal?: AbortSignal, tier?: string): Promise<number> {
    const snapshot = await this.#deps.members.get(pool, signal);
    if (!snapshot) throw new NotFoundError('pool', pool);
    return tier === undefined ? snapshot.members.length : tierView(snapshot, tier).count;
  }

  /** How many sessions of the pool are live (picked within the session TTL); NotFoundError for an unknown pool. */
  async liveSessions(pool: string, signal?: AbortSignal): Promise<number> {
    if (!(await this.#deps.members.get(pool, signal))) throw new NotFoundError('pool', pool);
    return Number(await LIVE_SESSIONS.run(this.#deps.redis, [this.#deps.keys.sessions(pool)], [], signal));
  }

  /** The member a session holds now (for feedback through the pool), or undefined when it has none; NotFoundError for an unknown pool. */
  async memberOf(pool: string, session: string, signal?: AbortSignal): Promise<string | undefined> {
    if (!(await this.#deps.members.get(pool, signal))) throw new NotFoundError('pool', pool);
    signal?.throwIfAborted();
    return (await this.#deps.redis.get(this.#deps.keys.session(pool, session))) ?? undefined;
  }
}
