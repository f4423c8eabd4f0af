import type { RedisClient } from '../redis/connections.ts';
import type { DemandReading } from './autoscale.ts';
import type { PickKeys } from './pick-keys.ts';
import { LUA_NOW_MS, LuaScript } from './pick-script.ts';

/** An autoscaled pool's pick counter and last pick, with Redis's clock. KEYS: the pool's demand hash. */
const READ_DEMAND = new LuaScript(
  `${LUA_NOW_MS}
local v = redis.call('HMGET', KEYS[1], 'picks', 'last')
return {v[1] or '0', v[2] or '', now_ms()}`,
  1,
);

/**
 * What the pool reconcile reads and writes of the keys picks use (pick-keys.ts): the pick counter of
 * an autoscaled pool (the pick script counts), and the spent-budget key (the pick script reads).
 */
export interface PickDemandStore {
  read(pool: string, signal?: AbortSignal): Promise<DemandReading>;
  /** Marks the pool's budget spent until `untilMs` (epoch ms; the window's end): `value` from spentBudgetValue. */
  markSpent(pool: string, value: string, untilMs: number, signal?: AbortSignal): Promise<void>;
  /** The budget is not spent (or the pool has none): picks go on. */
  clearSpent(pool: string, signal?: AbortSignal): Promise<void>;
  /** The pool is gone: its counter and spent-budget key go too (a pool made again under its name starts clean). */
  forget(pool: string, signal?: AbortSignal): Promise<void>;
}

export class RedisPickDemand implements PickDemandStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: PickKeys,
  ) {}

  async read(pool: string, signal?: AbortSignal): Promise<DemandReading> {
    const [picks, last, now] = (await READ_DEMAND.run(this.redis, [this.keys.demand(pool)], [], signal)) as [string, string, number];
    return { picks: Number(picks) || 0, ...(last === '' ? {} : { lastPickMs: Number(last) }), nowMs: Number(now) };
  }

  async markSpent(pool: string, value: string, untilMs: number, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    await this.redis.set(this.keys.budget(pool), value, 'PXAT', untilMs);
  }

  async clearSpent(pool: string, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    await this.redis.del(this.keys.budget(pool));
  }

  async forget(pool: string, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    await this.redis.del(this.keys.budget(pool), this.keys.demand(pool));
  }
}
