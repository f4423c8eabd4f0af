import type { RedisClient } from '../redis/connections.ts';
import type { PickKeys } from './pick-keys.ts';
import { LUA_NOW_MS, LuaScript } from './pick-script.ts';

/**
 * A token bucket per caller in Redis (so every API replica draws from the same one), on the
 * server's clock. ARGV: rate per second, burst. Answers 0 when a report may go ahead, else the
 * milliseconds until one may.
 */
const TAKE = new LuaScript(
  `${LUA_NOW_MS}
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = now_ms()
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
if now > at then tokens = math.min(burst, tokens + (now - at) * rate / 1000) end
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) * 1000 / rate) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(math.max(now, at)))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return wait`,
  1,
  { fenced: { what: 'the feedback rate limit' } },
);

/** Feedback's rate limit (`--feedback-rate`, `--feedback-burst`), per token name. */
export class FeedbackRateLimit {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: PickKeys,
    private readonly rate: number,
    private readonly burst: number,
  ) {}

  /** 0 when `caller` may send a report now (one is taken), else the milliseconds to wait. */
  async take(caller: string, signal?: AbortSignal): Promise<number> {
    return Number(await TAKE.run(this.redis, [this.keys.rate(caller)], [this.rate, this.burst], signal));
  }
}
