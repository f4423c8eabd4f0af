import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../redis/connections.ts';
import { LuaScript } from '../redis/lua-script.ts';
import { asBaseline } from '../providers/local/traffic-baseline.ts';

/**
 * Where the remote traffic sources (remote-traffic.ts) keep what the usage store has taken of each
 * remote proxy's counts, shared by the fleet's workers in Redis:
 *
 * - `<prefix>:usage:remote-baselines:<provider>`: a hash, field = the proxy's uid, value =
 *   `{identity, counts}` JSON (what StatsGrowth.baseline gives), written after the store took a
 *   collection; the fields of proxies the store no longer has are deleted in the same script, and
 *   the field `~writer` names the worker that wrote last.
 * - `<prefix>:usage:remote-collector:<provider>`: a lease naming the one worker that collects the
 *   provider's traffic (every worker could reach the proxies; each counting them would store their
 *   traffic once per worker). A worker takes it when it is free, renews it at each collection, and
 *   writes the baselines only while it holds it; a worker that takes it over starts from the
 *   baselines. One lease per provider: workers configured with different providers each collect theirs.
 */
export interface Baseline {
  identity: string;
  counts: Record<string, number>;
}

/** What `claim` found: the lease is another worker's, this worker's still, or this worker's from now on. */
export type LeaseClaim = 'other' | 'held' | 'taken';

/** The hash's field naming the worker that wrote it last (no uid starts with `~`). */
const WRITER_FIELD = '~writer';

const claimScript = new LuaScript(
  `local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if holder then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 2`,
  1,
);

const releaseScript = new LuaScript(
  `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`,
  1,
);

/** ARGV: claimant, number of fields to set, then field/value pairs, then the fields to delete. */
const commitScript = new LuaScript(
  `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[2])
for i = 3, 2 + 2 * n, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
for i = 3 + 2 * n, #ARGV do redis.call('HDEL', KEYS[2], ARGV[i]) end
redis.call('HSET', KEYS[2], '${WRITER_FIELD}', ARGV[1])
return 1`,
  2,
);

/** The baselines of a provider's proxies, by uid, and the worker that wrote them last. */
export interface StoredBaselines {
  baselines: Map<string, Baseline>;
  writer: string | undefined;
}

export class RemoteBaselines {
  /** This worker, as the lease names it (one per process: every provider's source shares it). */
  readonly claimant = randomUUID();
  /** The providers whose lease this worker took (given up at `release`). */
  readonly #claimed = new Set<string>();

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  #lease(provider: string): string {
    return `${this.prefix}:usage:remote-collector:${provider}`;
  }

  #hash(provider: string): string {
    return `${this.prefix}:usage:remote-baselines:${provider}`;
  }

  /** Takes or renews `provider`'s lease for `ttlMs`. */
  async claim(provider: string, ttlMs: number, signal: AbortSignal): Promise<LeaseClaim> {
    const reply = await claimScript.run(this.redis, [this.#lease(provider)], [this.claimant, Math.max(1, Math.floor(ttlMs))], signal);
    if (reply !== 0) this.#claimed.add(provider);
    return reply === 2 ? 'taken' : reply === 1 ? 'held' : 'other';
  }

  /** Gives up the leases this worker holds (at shutdown, after the last collection), so another worker need not wait for them to expire. */
  async release(signal: AbortSignal): Promise<void> {
    const providers = [...this.#claimed];
    this.#claimed.clear();
    await Promise.all(providers.map((provider) => releaseScript.run(this.redis, [this.#lease(provider)], [this.claimant], signal)));
  }

  /** Every baseline kept for `provider`'s proxies, by uid (malformed ones left out), and who wrote them. */
  async load(provider: string, signal: AbortSignal): Promise<StoredBaselines> {
    signal.throwIfAborted();
    const fields = await this.redis.hgetall(this.#hash(provider));
    const baselines = new Map<string, Baseline>();
    for (const [uid, text] of Object.entries(fields)) {
      if (uid === WRITER_FIELD) continue;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        continue;
      }
      const baseline = asBaseline(value);
      if (baseline) baselines.set(uid, baseline);
    }
    return { baselines, writer: fields[WRITER_FIELD] };
  }

  /** Writes `set` and deletes `gone` (uids), only while this worker holds the lease; false when it does not (nothing written). */
  async commit(provider: string, set: ReadonlyMap<string, Baseline>, gone: readonly string[], signal: AbortSignal): Promise<boolean> {
    const pairs = [...set].flatMap(([uid, b]) => [uid, JSON.stringify(b)]);
    const reply = await commitScript.run(this.redis, [this.#lease(provider), this.#hash(provider)], [this.claimant, set.size, ...pairs, ...gone], signal);
    return reply === 1;
  }
}
