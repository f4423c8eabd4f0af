/** The pools' scripts (picks, feedback, its rate limit) run through the one Lua helper, src/redis/lua-script.ts. */
export { LuaScript } from '../redis/lua-script.ts';

/** Milliseconds of the Redis server's clock: every API replica judges expiries by the same clock. */
export const LUA_NOW_MS = `local function now_ms() local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end`;
