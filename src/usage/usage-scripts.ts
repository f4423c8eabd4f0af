/*
 * The usage store's Redis scripts and keys. Every key is under the fleet's hash-tagged prefix, so
 * one script may touch them all on a Redis Cluster. Field parts are joined by \x1f (unit separator),
 * which no pool, provider, proxy or domain name holds.
 */
import { LuaScript } from '../redis/lua-script.ts';

export class UsageKeys {
  constructor(readonly prefix: string) {}
  /** Per hour (`YYYY-MM-DDTHH`): what the collector wrote, by proxy, pool, provider and domain. */
  traffic(hour: string): string {
    return `${this.prefix}:usage:traffic:${hour}`;
  }
  /** Per hour: the domains kept per pool (`<pool>\x1f<domain>`) and their number (`#<pool>`). */
  domains(hour: string): string {
    return `${this.prefix}:usage:domains:${hour}`;
  }
  /** Per hour or day: traffic by pool and provider. */
  byPool(period: string): string {
    return `${this.prefix}:usage:by-pool:${period}`;
  }
  /** Per hour or day: traffic by domain and provider. */
  byDomain(period: string): string {
    return `${this.prefix}:usage:by-domain:${period}`;
  }
  /** Life id → the life (JSON). */
  get lives(): string {
    return `${this.prefix}:usage:lives`;
  }
  /** `<provider>/<instance>` → the id of its current life. */
  get current(): string {
    return `${this.prefix}:usage:lives:current`;
  }
  /** Life ids by when they ended (+inf while open): what a window reads and retention trims. */
  get ends(): string {
    return `${this.prefix}:usage:lives:ends`;
  }
}

/** Keys per hour of an `ADD_TRAFFIC` call, in this order. */
export const KEYS_PER_HOUR = 6;
/** Arguments per record of an `ADD_TRAFFIC` call. */
export const ARGS_PER_RECORD = 9;

/**
 * Adds traffic records. KEYS: for each hour of the records, its traffic, domains, by-pool hour,
 * by-pool day, by-domain hour and by-domain day keys. ARGV: the domain bound, the number of hours,
 * each hour's and day's expiry (ms), then per record: its hour's index (1-based), proxy, pool,
 * provider, domain, bytes up, bytes down, requests, tunnels. A domain not yet kept for the pool and
 * hour is kept while fewer than the bound are; otherwise it is counted as `other`.
 */
const ADD_TRAFFIC = `
local S = '\\31'
local maxd = tonumber(ARGV[1])
local hours = tonumber(ARGV[2])
local metrics = {'u', 'd', 'r', 't'}
local i = 3 + 2 * hours
while i <= #ARGV do
  local base = (tonumber(ARGV[i]) - 1) * ${KEYS_PER_HOUR}
  local proxy, pool, provider, domain = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  if domain ~= 'other' then
    local mark = pool .. S .. domain
    if redis.call('HEXISTS', KEYS[base + 2], mark) == 0 then
      local kept = tonumber(redis.call('HGET', KEYS[base + 2], '#' .. pool) or '0')
      if kept < maxd then
        redis.call('HSET', KEYS[base + 2], mark, '1')
        redis.call('HINCRBY', KEYS[base + 2], '#' .. pool, 1)
      else
        domain = 'other'
      end
    end
  end
  for m = 1, 4 do
    local v = ARGV[i + 4 + m]
    if v ~= '0' then
      local metric = metrics[m]
      redis.call('HINCRBY', KEYS[base + 1], proxy .. S .. pool .. S .. provider .. S .. domain .. S .. metric, v)
      redis.call('HINCRBY', KEYS[base + 3], pool .. S .. provider .. S .. metric, v)
      redis.call('HINCRBY', KEYS[base + 4], pool .. S .. provider .. S .. metric, v)
      redis.call('HINCRBY', KEYS[base + 5], domain .. S .. provider .. S .. metric, v)
      redis.call('HINCRBY', KEYS[base + 6], domain .. S .. provider .. S .. metric, v)
    end
  end
  i = i + ${ARGS_PER_RECORD}
end
for h = 1, hours do
  local base = (h - 1) * ${KEYS_PER_HOUR}
  for j = 1, ${KEYS_PER_HOUR} do
    local at = (j == 4 or j == 6) and ARGV[2 + 2 * h] or ARGV[1 + 2 * h]
    redis.call('PEXPIREAT', KEYS[base + j], at)
  end
end
return 1`;

const addTrafficScripts = new Map<number, LuaScript>();

/** ADD_TRAFFIC for records of `hours` distinct hours (one script text; LuaScript checks the number of keys). */
export function addTrafficScript(hours: number): LuaScript {
  let script = addTrafficScripts.get(hours);
  if (!script) addTrafficScripts.set(hours, (script = new LuaScript(ADD_TRAFFIC, hours * KEYS_PER_HOUR)));
  return script;
}

/** Drops at most 100 lives that ended before ARGV[1] (ms): retention, run by every life write. */
const PRUNE = `
local function prune(cutoff)
  local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. cutoff, 'LIMIT', 0, 100)
  for _, id in ipairs(old) do
    local text = redis.call('HGET', KEYS[1], id)
    if text then
      local l = cjson.decode(text)
      local key = l.provider .. '/' .. l.instance
      if redis.call('HGET', KEYS[2], key) == id then redis.call('HDEL', KEYS[2], key) end
      redis.call('HDEL', KEYS[1], id)
    end
    redis.call('ZREM', KEYS[3], id)
  end
end
prune(ARGV[1])
local cur = redis.call('HGET', KEYS[2], ARGV[2])
local life = nil
if cur then
  local text = redis.call('HGET', KEYS[1], cur)
  if text then life = cjson.decode(text) end
end
`;

/**
 * An instance started (instance-lives.ts' `onStart`). KEYS: lives, current, ends. ARGV: the
 * retention cutoff, the instance key, the life (JSON, with startMs), its start (ms), a new life's id.
 */
export const INSTANCE_STARTED = new LuaScript(
  `${PRUNE}
local start = tonumber(ARGV[4])
if life then
  if life.startMs == nil then
    if life.endMs ~= nil and life.endMs >= start then
      local done = cjson.decode(ARGV[3])
      done.endMs = life.endMs
      redis.call('HSET', KEYS[1], cur, cjson.encode(done))
      return 1
    end
  elseif life.endMs == nil or start < life.endMs then
    return 0
  end
end
redis.call('HSET', KEYS[1], ARGV[5], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[5])
redis.call('ZADD', KEYS[3], '+inf', ARGV[5])
return 2`,
  3,
);

/**
 * An instance ended (instance-lives.ts' `onEnd`). KEYS: lives, current, ends. ARGV: the retention
 * cutoff, the instance key, the end (ms), a pending end's life (JSON) and id.
 */
export const INSTANCE_ENDED = new LuaScript(
  `${PRUNE}
local ended = tonumber(ARGV[3])
if life then
  if life.endMs ~= nil then return 0 end
  if life.startMs ~= nil and ended >= life.startMs then
    life.endMs = ended
    redis.call('HSET', KEYS[1], cur, cjson.encode(life))
    redis.call('ZADD', KEYS[3], ARGV[3], cur)
    return 1
  end
  return 0
end
redis.call('HSET', KEYS[1], ARGV[5], ARGV[4])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[5])
return 2`,
  3,
);

/** The lives whose end scores at least ARGV[1] (`(<ms>`: ended after it; `+inf`: the open ones), as JSON. KEYS: lives, ends. */
export const LIVES_FROM = new LuaScript(
  `
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], '+inf')
local out = {}
for first = 1, #ids, 500 do
  local texts = redis.call('HMGET', KEYS[1], unpack(ids, first, math.min(first + 499, #ids)))
  for _, t in ipairs(texts) do if t then out[#out + 1] = t end end
end
return out`,
  2,
);
