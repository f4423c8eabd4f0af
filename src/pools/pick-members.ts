import { createHash } from 'node:crypto';
import { toError } from '../errors.ts';
import { urlWithCredentials } from '../model/proxy-credentials.ts';
import { POOL_LABEL, TIER_LABEL, type Pool } from '../model/pool-resource.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { ProxyChanges, ProxyCredentialsReader, ProxyReader } from '../store/proxy-store.ts';
import type { ProxyCredentials } from '../model/proxy-credentials.ts';

/** What the cache reads of the PoolStore port. */
export interface PoolLister {
  list(signal?: AbortSignal): Promise<Pool[]>;
}

/**
 * What the cache reads of the ProxyStore port: where the store keeps a change feed (Redis,
 * `changesSince`), only what changed; else the pools' proxies (Kubernetes, `listPoolMembers`); else
 * every proxy.
 */
export type MemberSource = Pick<ProxyReader, 'list' | 'changesSince' | 'listPoolMembers'> & Pick<ProxyCredentialsReader, 'credentialsOf'>;

/** A Ready member as picks hand it out: its name, its URL with credentials, and its `tier` label. */
export interface PickableMember {
  name: string;
  proxyUrl: string;
  tier?: string;
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
 * pick costs one Redis round trip (the choice) instead of a listing. One refresh serves every pool
 * at once, and concurrent picks share it; a pick therefore sees members at most `ttlMs` plus one
 * refresh old. Where the store has a change feed, a refresh reads only the proxies written since
 * the last one (a round trip when none was), so its cost follows the fleet's changes, not its
 * size; otherwise it lists every proxy. Credentials are read once per member (by name and uid: a
 * re-created proxy has new ones) and forgotten when the member leaves.
 *
 * A member is pickable when its Proxy is `Ready`, not being deleted, has a URL and credentials.
 * A pool being deleted is not served (unknown, as far as picks go).
 */
export class PoolMemberCache {
  readonly #pools: PoolLister;
  readonly #proxies: MemberSource;
  readonly #ttlMs: number;
  readonly #clock: () => number;
  #snapshot: { at: number; pools: Map<string, PoolSnapshot>; poolsText: string } | undefined;
  #refreshing: Promise<Map<string, PoolSnapshot>> | undefined;
  #credentials = new Map<string, ProxyCredentials>();
  /** The pickable proxies as of `#revision` (the change feed's), by name. */
  #pickable = new Map<string, Proxy>();
  #revision: number | undefined;
  /** Some pickable proxy had no credentials or URL at the last refresh: the next one builds again even if nothing changed. */
  #incomplete = false;

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

  /** The proxies changed since the last refresh (all of them where the store has no change feed). */
  async #changes(signal: AbortSignal): Promise<ProxyChanges> {
    if (this.#proxies.changesSince) return this.#proxies.changesSince(this.#revision, signal);
    const written = this.#proxies.listPoolMembers ? await this.#proxies.listPoolMembers(signal) : await this.#proxies.list(signal);
    return { revision: 0, full: true, written, removed: [] };
  }

  async #load(): Promise<Map<string, PoolSnapshot>> {
    const at = this.#clock();
    const signal = AbortSignal.timeout(LIST_DEADLINE_MS);
    const [pools, changes] = await Promise.all([this.#pools.list(signal), this.#changes(signal)]);
    const poolsText = JSON.stringify(pools);
    const previous = this.#snapshot;
    const unchanged = !changes.full && changes.written.length === 0 && changes.removed.length === 0;
    if (unchanged && !this.#incomplete && previous?.poolsText === poolsText) {
      this.#snapshot = { ...previous, at };
      return previous.pools;
    }
    const pickable = changes.full ? new Map<string, Proxy>() : new Map(this.#pickable);
    for (const name of changes.removed) pickable.delete(name);
    for (const p of changes.written) {
      if (isPickable(p)) pickable.set(p.name, p);
      else pickable.delete(p.name);
    }
    const ready = [...pickable.values()];
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
      const tier = p.labels[TIER_LABEL];
      list.push({ name: p.name, proxyUrl: urlWithCredentials(p.status.url, secret), ...(tier === undefined ? {} : { tier }) });
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
    this.#pickable = pickable;
    this.#revision = this.#proxies.changesSince ? changes.revision : undefined;
    this.#incomplete = ready.some((p) => !kept.has(key(p)));
    this.#snapshot = { at, pools: result, poolsText };
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
