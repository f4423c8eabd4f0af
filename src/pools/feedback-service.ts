import { NotFoundError } from '../errors.ts';
import { POOL_LABEL, TIER_LABEL, type Pool } from '../model/pool-resource.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { RedisClient } from '../redis/connections.ts';
import type { MemberReplacements } from './member-replacements.ts';
import type { PickKeys } from './pick-keys.ts';
import { LUA_NOW_MS, LuaScript } from './pick-script.ts';
import { nextTier } from './pick-tiers.ts';

export const FEEDBACK_OUTCOMES = ['blocked', 'captcha', 'ok'] as const;
export type FeedbackOutcome = (typeof FEEDBACK_OUTCOMES)[number];

/** What became of a report's replacement rule. */
export type ReplacementState = 'requested' | 'already-requested' | 'below-threshold' | 'not-in-pool';

export interface FeedbackResult {
  proxy: string;
  /** The pool the proxy is a member of; absent for a proxy outside any pool. */
  pool?: string;
  outcome: FeedbackOutcome;
  domain: string;
  /** Until when the member is not picked for `domain` (blocked and captcha reports on pool members). */
  blockedUntil?: string;
  /** Distinct domains the proxy was reported blocked on within --feedback-replace-window. */
  blockedDomains: number;
  replacement: ReplacementState;
  /**
   * Blocked and captcha reports on a pool member: the tier after the member's own (its `tier`
   * label) in the pool's `spec.tiers`, where a crawler escalates; absent when there is none.
   */
  nextTier?: string;
}

/** Counts reports per pool (`""` outside any) and outcome, and replacements requested for bans. */
export interface FeedbackCounter {
  reported(pool: string, outcome: FeedbackOutcome): void;
  replacementRequested(pool: string): void;
}

/**
 * What feedback tells the rest of the fleet (events, in the API: src/events/feedback-events.ts):
 * a block that started and a replacement asked of a pool. Never throws.
 */
export interface FeedbackNotices {
  blocked(proxy: Proxy, pool: string | undefined, outcome: 'blocked' | 'captcha', domain: string, by: string, blockedUntil: string | undefined): void;
  replacementRequested(proxy: Proxy, pool: string, reason: string, by: string): void;
}

export interface FeedbackSettings {
  blockCooldownMs: number;
  replaceDomains: number;
  replaceWindowMs: number;
}

/**
 * Records one report. KEYS: the pool's blocked set for the domain, the proxy's blocked-domains
 * window, a session's key. ARGV: outcome, member, domain, cool-down (ms), window (ms), in-pool,
 * has-session. Answers {distinct domains in the window, blocked until (ms, 0 for none), newly
 * blocked (1: this report started the block)}.
 *
 * `ok` changes nothing: a success seen by one crawler does not outweigh a block seen by another
 * (reports race), so blocks end only by time. `blocked` and `captcha` exclude the member from
 * picks for the domain for the cool-down and count the domain toward replacement; through a
 * pool's session, the session is also let go so that its next pick chooses again.
 */
const REPORT = new LuaScript(
  `${LUA_NOW_MS}
local outcome, member, domain = ARGV[1], ARGV[2], ARGV[3]
local cooldown, window = tonumber(ARGV[4]), tonumber(ARGV[5])
local in_pool, has_session = ARGV[6] == '1', ARGV[7] == '1'
local now = now_ms()
if outcome == 'ok' then
  return {redis.call('ZCOUNT', KEYS[2], now - window, '+inf'), 0, 0}
end
local until_ms = now + cooldown
local newly = 1
if in_pool then
  local current = redis.call('ZSCORE', KEYS[1], member)
  if current and tonumber(current) > now then newly = 0 end
  redis.call('ZADD', KEYS[1], until_ms, member)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('PEXPIRE', KEYS[1], cooldown)
else
  local last = redis.call('ZSCORE', KEYS[2], domain)
  if last and tonumber(last) > now - cooldown then newly = 0 end
  until_ms = 0
end
redis.call('ZADD', KEYS[2], now, domain)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
redis.call('PEXPIRE', KEYS[2], math.max(window, cooldown))
if has_session and redis.call('GET', KEYS[3]) == member then redis.call('DEL', KEYS[3]) end
return {redis.call('ZCARD', KEYS[2]), until_ms, newly}`,
  3,
  { fenced: { what: 'the feedback report' } },
);

export interface FeedbackRecorderDeps {
  redis: RedisClient;
  keys: PickKeys;
  /** Proxy and pool objects (the parts of the store ports used here). */
  proxies: { get(name: string, signal?: AbortSignal): Promise<Proxy | undefined> };
  pools: { get(name: string, signal?: AbortSignal): Promise<Pool | undefined> };
  replacements: MemberReplacements;
  /** Asks the pool reconcile to look at a pool (requestPoolReconcile on the reconcile queue). */
  requestPoolReconcile: (pool: string) => Promise<void>;
  settings: FeedbackSettings;
  counter: FeedbackCounter;
  notices: FeedbackNotices;
}

/** `POST /v1/proxies/{name}/feedback` and `POST /v1/pools/{name}/feedback`: ban feedback. */
export class FeedbackRecorder {
  readonly #deps: FeedbackRecorderDeps;
  constructor(deps: FeedbackRecorderDeps) {
    this.#deps = deps;
  }

  /**
   * Records a report about `proxyName` (NotFoundError when there is no such proxy). `via` names
   * the pool and session the report came through (the session is let go on a block), `by` the
   * caller's token name for events. `onRecorded` is called once the report itself is recorded
   * (before any replacement request): a request answered 503 after it says so.
   */
  async report(
    proxyName: string,
    report: { outcome: FeedbackOutcome; domain: string },
    by: string,
    via?: { pool: string; session: string },
    signal?: AbortSignal,
    onRecorded?: () => void,
  ): Promise<FeedbackResult> {
    const { redis, keys, settings } = this.#deps;
    const proxy = await this.#deps.proxies.get(proxyName, signal);
    if (!proxy) throw new NotFoundError('proxy', proxyName);
    const label = proxy.labels[POOL_LABEL];
    const pool = label === undefined ? undefined : await this.#deps.pools.get(label, signal);
    const poolName = pool && !pool.metadata.deletionRequestedAt ? pool.name : undefined;
    const { outcome, domain } = report;
    const reply = (await REPORT.run(
      redis,
      [keys.blocked(poolName ?? via?.pool ?? '', domain), keys.blockedDomains(proxy.name), keys.session(via?.pool ?? '', via?.session ?? '')],
      [outcome, proxy.name, domain, settings.blockCooldownMs, settings.replaceWindowMs, poolName ? '1' : '0', via ? '1' : '0'],
      signal,
    )) as [number, number, number];
    const [blockedDomains, untilMs, newly] = reply;
    onRecorded?.();
    this.#deps.counter.reported(poolName ?? '', outcome);
    const base = { proxy: proxy.name, ...(poolName ? { pool: poolName } : {}), outcome, domain, blockedDomains };
    if (outcome === 'ok') return { ...base, replacement: poolName ? 'below-threshold' : 'not-in-pool' };
    const blockedUntil = untilMs > 0 ? new Date(untilMs).toISOString() : undefined;
    if (newly === 1) this.#deps.notices.blocked(proxy, poolName, outcome, domain, by, blockedUntil);
    const next = poolName ? nextTier(pool?.spec.tiers, proxy.labels[TIER_LABEL]) : undefined;
    const result = { ...base, ...(blockedUntil ? { blockedUntil } : {}), ...(next === undefined ? {} : { nextTier: next }) };
    if (!poolName) return { ...result, replacement: 'not-in-pool' };
    if (blockedDomains < settings.replaceDomains) return { ...result, replacement: 'below-threshold' };
    const reason = `blocked on ${blockedDomains} domains within ${formatMs(settings.replaceWindowMs)}`;
    const fresh = await this.#deps.replacements.request(poolName, proxy.name, reason, signal);
    if (!fresh) return { ...result, replacement: 'already-requested' };
    await this.#deps.requestPoolReconcile(poolName);
    this.#deps.counter.replacementRequested(poolName);
    this.#deps.notices.replacementRequested(proxy, poolName, reason, by);
    return { ...result, replacement: 'requested' };
  }
}

/** `600000` → `10m`, `90000` → `90s`: how durations read in reasons. */
function formatMs(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
