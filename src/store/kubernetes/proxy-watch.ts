import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../../logging.ts';
import { POOL_LABEL } from '../../model/pool-resource.ts';
import type { ProxyChangeFeed } from '../proxy-store.ts';
import type { PoolObject } from './pool-store.ts';
import { storedStatus, type ProxyObject } from './proxy-objects.ts';
import { ResourceWatch, type ResourceWatchOptions, type WatchedResource } from './resource-watch.ts';

export type ProxyWatchOptions = ResourceWatchOptions;

/** What a Proxy looked like last time, to tell a change that needs a reconcile from a status write. */
interface ProxySeen {
  generation: number | undefined;
  deleting: boolean;
  /** Its pool (the `egress-proxies.io/pool` label), if it is a member. */
  pool: string | undefined;
  phase: string;
}

/** What a ProxyPool looked like last time. */
interface PoolSeen {
  generation: number | undefined;
  deleting: boolean;
}

/** New, gone, its spec changed (its generation moved) or its deletion requested: the object's own reconcile is due. */
function desiredStateChanged(before: PoolSeen | undefined, after: PoolSeen | undefined): boolean {
  return !before || !after || before.generation !== after.generation || (after.deleting && !before.deleting);
}

function proxies(onChange: (name: string) => void, onPoolChange: ((pool: string) => void) | undefined): WatchedResource<ProxyObject, ProxySeen> {
  return {
    plural: 'proxies',
    snapshot: (obj) => ({
      generation: obj.metadata.generation,
      deleting: obj.metadata.deletionTimestamp !== undefined,
      pool: obj.metadata.labels?.[POOL_LABEL],
      // A Proxy without a status yet reads as Pending (toProxy), and so does one whose status breaks the
      // schema (the stores log that): its first status write is no change of phase.
      phase: storedStatus(obj, { now: new Date() }).phase,
    }),
    changed(name, before, after) {
      const own = desiredStateChanged(before, after);
      if (own) onChange(name);
      if (!onPoolChange) return;
      // A member's pool counts its members and their phases: it hears of each of those changes, and both
      // pools of a Proxy relabelled from one to the other do.
      const moved = before?.pool !== after?.pool;
      const phase = before?.phase !== after?.phase;
      for (const pool of new Set([before?.pool, after?.pool])) if (pool !== undefined && (own || moved || phase)) onPoolChange(pool);
    },
  };
}

function pools(onPoolChange: (pool: string) => void): WatchedResource<PoolObject, PoolSeen> {
  return {
    plural: 'proxypools',
    snapshot: (obj) => ({ generation: obj.metadata.generation, deleting: obj.metadata.deletionTimestamp !== undefined }),
    changed(name, before, after) {
      if (desiredStateChanged(before, after)) onPoolChange(name);
    },
  };
}

/**
 * The leading scheduler's watch (`--store kubernetes`) on the desired state others write with kubectl.
 *
 * - Proxies: `onChange(name)` once per change that needs the proxy's reconcile: a Proxy added (or
 *   listed for the first time), its spec changed (its generation moved), its deletion requested
 *   (`deletionTimestamp` set), or the Proxy gone. Status writes (reconcile's own) and labels do not count.
 * - With `onPoolChange`, ProxyPools too: a pool added, its spec changed, its deletion requested or the
 *   pool gone; and a member Proxy (label `egress-proxies.io/pool`) added, changed as above, gone, moved
 *   to another pool or into another phase reports its pool (both, when it moved).
 *
 * Each resource is followed by its own ResourceWatch (list, then watch; resume; relist on 410 Gone;
 * backoff on failures): a failing ProxyPool watch (such as a CRD not installed yet) does not stop the Proxy one.
 */
export class ProxyWatch implements ProxyChangeFeed {
  readonly #kc: KubeConfig;
  readonly #namespace: string;
  readonly #logger: Logger;
  readonly #options: ProxyWatchOptions;

  constructor(kc: KubeConfig, namespace: string, logger: Logger, options: ProxyWatchOptions = {}) {
    this.#kc = kc;
    this.#namespace = namespace;
    this.#logger = logger;
    this.#options = options;
  }

  /** Runs until `signal` ends; never rejects for a failed list or watch (each backs off and tries again). */
  async run(onChange: (name: string) => void, signal: AbortSignal, onPoolChange?: (pool: string) => void): Promise<void> {
    const watch = <O extends ProxyObject | PoolObject, S>(resource: WatchedResource<O, S>): Promise<void> =>
      new ResourceWatch(this.#kc, this.#namespace, resource, this.#logger, this.#options).run(signal);
    await Promise.all([watch(proxies(onChange, onPoolChange)), ...(onPoolChange ? [watch(pools(onPoolChange))] : [])]);
  }
}
