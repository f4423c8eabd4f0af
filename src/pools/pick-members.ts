import { createHash } from 'node:crypto';
import { toError } from '../errors.ts';
import { urlWithCredentials } from '../model/proxy-credentials.ts';
import { POOL_LABEL, type Pool } from '../model/pool-resource.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { ProxyCredentials } from '../providers/lifecycle.ts';

/**
 * What the cache reads: the parts of the PoolStore and ProxyStore ports it uses (declared here,
 * structurally, because src/store depends on src/pools for MemberReplacements).
 */
export interface PoolLister {
  list(signal?: AbortSignal): Promise<Pool[]>;
}
export interface MemberSource {
  list(signal?: AbortSignal): Promise<Proxy[]>;
  credentialsOf(names: readonly string[], signal?: AbortSignal): Promise<(ProxyCredentials | undefined)[]>;
}

/** A Ready member as picks hand it out: its name and its URL with credentials. */
export interface PickableMember {
  name: string;
  proxyUrl: string;
}

/** A pool as picks see it: the pool and its Ready members, sorted by name. */
export interface PoolSnapshot {
  pool: Pool;
  members: readonly PickableMember[];
  /** The members by name. */
  byName: ReadonlyMap<string, PickableMember>;
  /** The member names, one a line, and a hash of them: the pick script syncs Redis to a list only when the hash changes. */
  names: string;
  version: string;
}

/** How long one listing of pools and proxies may take before the picks waiting on it fail. */
const LIST_DEADLINE_MS = 5000;

/**
 * The Ready members of every pool, kept in the API process for `ttlMs` (`--pick-cache`) so that a
 * pick costs one Redis round trip (the choice) instead of a listing. One listing of pools and
 * proxies refreshes every pool at once, and concurrent picks share it; a pick therefore sees
 * members at most `ttlMs` plus one listing old. Credentials are read once per member (by name and
 * uid: a re-created proxy has new ones) and forgotten when the member leaves.
 *
 * A member is pickable when its Proxy is `Ready`, not being deleted, has a URL and credentials.
 * A pool being deleted is not served (unknown, as far as picks go).
 */
export class PoolMemberCache {
  readonly #pools: PoolLister;
  readonly #proxies: MemberSource;
  readonly #ttlMs: number;
  readonly #clock: () => number;
  #snapshot: { at: number; pools: Map<string, PoolSnapshot> } | undefined;
  #refreshing: Promise<Map<string, PoolSnapshot>> | undefined;
  #credentials = new Map<string, ProxyCredentials>();

  constructor(pools: PoolLister, proxies: MemberSource, ttlMs: number, clock: () => number = () => performance.now()) {
    this.#pools = pools;
    this.#proxies = proxies;
    this.#ttlMs = ttlMs;
    this.#clock = clock;
  }

  /** The pool and its Ready members; undefined for an unknown pool or one being deleted. */
  async get(pool: string, signal?: AbortSignal): Promise<PoolSnapshot | undefined> {
    const snapshot = this.#snapshot;
    if (snapshot && this.#clock() - snapshot.at <= this.#ttlMs) return snapshot.pools.get(pool);
    const pools = await raceAbort(this.#refresh(), signal);
    return pools.get(pool);
  }

  #refresh(): Promise<Map<string, PoolSnapshot>> {
    this.#refreshing ??= this.#load().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #load(): Promise<Map<string, PoolSnapshot>> {
    const at = this.#clock();
    const signal = AbortSignal.timeout(LIST_DEADLINE_MS);
    const [pools, proxies] = await Promise.all([this.#pools.list(signal), this.#proxies.list(signal)]);
    const ready = proxies.filter(isPickable);
    const key = (p: Proxy): string => `${p.name}\0${p.metadata.uid}`;
    const missing = ready.filter((p) => !this.#credentials.has(key(p)));
    if (missing.length > 0) {
      const secrets = await this.#proxies.credentialsOf(
        missing.map((p) => p.name),
        signal,
      );
      missing.forEach((p, i) => {
        const secret = secrets[i];
        if (secret) this.#credentials.set(key(p), secret);
      });
    }
    const kept = new Map<string, ProxyCredentials>();
    const byPool = new Map<string, PickableMember[]>();
    for (const p of ready) {
      const secret = this.#credentials.get(key(p));
      const pool = p.labels[POOL_LABEL];
      if (!secret || !p.status.url || pool === undefined) continue;
      kept.set(key(p), secret);
      const list = byPool.get(pool) ?? [];
      list.push({ name: p.name, proxyUrl: urlWithCredentials(p.status.url, secret) });
      byPool.set(pool, list);
    }
    this.#credentials = kept;
    const result = new Map<string, PoolSnapshot>();
    for (const pool of pools) {
      if (pool.metadata.deletionRequestedAt) continue;
      const members = (byPool.get(pool.name) ?? []).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const names = members.map((m) => m.name).join('\n');
      const version = createHash('sha1').update(names).digest('base64url');
      result.set(pool.name, { pool, members, byName: new Map(members.map((m) => [m.name, m])), names, version });
    }
    this.#snapshot = { at, pools: result };
    return result;
  }
}

function isPickable(p: Proxy): boolean {
  return p.labels[POOL_LABEL] !== undefined && p.status.phase === 'Ready' && !p.metadata.deletionRequestedAt && Boolean(p.status.url);
}

/** `promise`, or the signal's reason as soon as it aborts (the shared listing goes on for the others). */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(toError(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(toError(e));
      },
    );
  });
}
