import type { Logger } from '../logging.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { ProviderConfig } from '../providers/config.ts';
import { StatsGrowth } from '../providers/local/stats-growth.ts';
import { flattenTraffic, unflattenTraffic } from '../providers/local/traffic-growth.ts';
import type { TrafficStats } from '../providers/local/traffic-stats.ts';
import type { ProxyCredentialsReader, ProxyReader } from '../store/proxy-store.ts';
import type { InstanceTraffic, TrafficSource } from '../model/traffic.ts';
import { instanceNameFor } from './instance-name.ts';
import type { RemoteBaselines } from './remote-baselines.ts';
import { fetchTrafficReport } from './traffic-report-client.ts';

/**
 * The traffic of remote proxies (kvm, gcp, kubernetes: docs/usage.md#traffic), one source per such
 * provider. Their VMs and pods count in memory and answer their own counts to a reserved request
 * (src/providers/local/traffic-report.ts); at each collection a source lists its provider's Ready
 * proxies in the store, asks each one (`concurrency` at a time, each within `timeoutMs`), and
 * answers what grew since its last look, keyed by the proxy's uid (a restarted proxy counts from
 * zero). A proxy that does not answer (down, an image without the report) is skipped and logged at
 * debug; it is asked again next time, and what it carried meanwhile is read then.
 *
 * What the usage store took is kept in Redis (remote-baselines.ts) at `commit`, so a restarted
 * worker, or another one taking over, reads nothing twice; only the worker holding the provider's
 * lease collects (the others read nothing), so the proxies' traffic is stored once however many
 * workers run. A failing listing or Redis is logged and reads nothing this time: nothing is lost.
 */
export const REMOTE_PROVIDER_TYPES: readonly ProviderConfig['type'][] = ['kvm', 'gcp', 'kubernetes'];

export const REMOTE_TRAFFIC_CONCURRENCY = 16;
export const REMOTE_TRAFFIC_TIMEOUT_MS = 5_000;
/** How long the listing and each Redis step of a collection may take. */
const STEP_TIMEOUT_MS = 10_000;

export interface RemoteTrafficOptions {
  proxies: Pick<ProxyReader, 'list'> & Pick<ProxyCredentialsReader, 'credentialsOf'>;
  baselines: RemoteBaselines;
  /** The installation's fleet id (fleetOf(prefix)): instances are named with it (instance-name.ts). */
  fleet: string;
  logger: Logger;
  /** How long the lease lasts without a collection renewing it (a few collection intervals). */
  leaseMs: number;
  concurrency?: number;
  timeoutMs?: number;
}

/** The remote traffic sources of a configuration: one per kvm, gcp or kubernetes provider. */
export function remoteTrafficSources(providers: readonly ProviderConfig[], options: RemoteTrafficOptions): TrafficSource[] {
  return providers
    .filter((p) => REMOTE_PROVIDER_TYPES.includes(p.type))
    .map((p) => {
      const source = new RemoteProviderTraffic(p.name, options);
      return { provider: p.name, read: () => source.read(), commit: () => source.commit() };
    });
}

/** The provider a proxy's instance is at (where it was made), else the one its spec names. */
function providerOf(p: Proxy): string {
  return p.status.instanceLocation?.provider ?? p.spec.provider;
}

/** `work` on every item, at most `limit` at once; the results in order. */
async function mapBounded<T, R>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

export class RemoteProviderTraffic {
  #growth = new StatsGrowth();
  /** Whether this worker held the lease at its last look. */
  #holding = false;
  /** The baselines' last writer as this worker knows them (read, or itself after a commit); undefined before the first load. */
  #writer: { id: string | undefined } | undefined;
  /** Proxies (uids) whose baseline moved since the last commit. */
  readonly #moved = new Set<string>();
  /** Proxies (uids) whose baseline is in Redis, as far as this worker knows. */
  #stored = new Set<string>();
  /** The provider's proxies (uids) in the store at the last listing. */
  #present: Set<string> | undefined;

  constructor(
    readonly provider: string,
    private readonly options: RemoteTrafficOptions,
  ) {}

  /** What grew since the last look; nothing when another worker collects, or the store or Redis failed. */
  async read(): Promise<InstanceTraffic[]> {
    try {
      return await this.#read();
    } catch (err) {
      this.options.logger.warn(
        { provider: this.provider, err: (err as Error).message },
        'could not read the remote proxies’ traffic; read at the next collection',
      );
      return [];
    }
  }

  /**
   * Takes or renews the lease; false when another worker holds it. Taking it, this worker starts
   * from the baselines in Redis, unless nobody wrote them since it last knew them (then what it
   * read and the store has not taken yet is still pending in the collector: reading it again from
   * Redis would count it twice).
   */
  async #hold(): Promise<boolean> {
    const { baselines } = this.options;
    const claim = await baselines.claim(this.provider, this.options.leaseMs, AbortSignal.timeout(STEP_TIMEOUT_MS));
    if (claim === 'other') {
      this.#holding = false;
      return false;
    }
    if (this.#writer === undefined || claim === 'taken' || !this.#holding) {
      const stored = await baselines.load(this.provider, AbortSignal.timeout(STEP_TIMEOUT_MS));
      if (this.#writer === undefined || stored.writer !== this.#writer.id) {
        this.#growth = new StatsGrowth();
        for (const [uid, baseline] of stored.baselines) this.#growth.seed(uid, baseline);
        this.#stored = new Set(stored.baselines.keys());
        this.#moved.clear();
        this.#writer = { id: stored.writer };
      }
    }
    this.#holding = true;
    return true;
  }

  async #read(): Promise<InstanceTraffic[]> {
    const { proxies } = this.options;
    if (!(await this.#hold())) return [];
    const signal = AbortSignal.timeout(STEP_TIMEOUT_MS);
    const mine = (await proxies.list(signal)).filter((p) => providerOf(p) === this.provider);
    this.#present = new Set(mine.map((p) => p.metadata.uid));
    const ready = mine.filter((p) => p.status.phase === 'Ready' && !p.metadata.deletionRequestedAt && p.status.url);
    const secrets =
      ready.length > 0
        ? await proxies.credentialsOf(
            ready.map((p) => p.name),
            signal,
          )
        : [];
    const reports = await mapBounded(ready, this.options.concurrency ?? REMOTE_TRAFFIC_CONCURRENCY, (p, i) => this.#report(p, secrets[i]));
    // Asking many proxies may outlast the lease: the counts are compared with the baselines of whoever holds it now.
    if (!(await this.#hold())) return [];
    const grown: InstanceTraffic[] = [];
    ready.forEach((p, i) => {
      const stats = reports[i];
      if (!stats) return;
      const uid = p.metadata.uid;
      const before = this.#growth.baseline(uid);
      const domains = unflattenTraffic(this.#growth.grow(uid, stats, flattenTraffic(stats.domains)));
      if (domains.size > 0 || before?.identity !== this.#growth.baseline(uid)?.identity) this.#moved.add(uid);
      if (domains.size > 0) grown.push({ instance: instanceNameFor(this.options.fleet, p), proxy: p.name, domains });
    });
    return grown;
  }

  async #report(p: Proxy, credentials: { username: string; password: string } | undefined): Promise<TrafficStats | undefined> {
    if (!credentials || !p.status.url) return undefined;
    try {
      return await fetchTrafficReport(p.status.url, credentials, AbortSignal.timeout(this.options.timeoutMs ?? REMOTE_TRAFFIC_TIMEOUT_MS));
    } catch (err) {
      this.options.logger.debug(
        { proxy: p.name, url: p.status.url, err: (err as Error).message },
        'no traffic report from the proxy; asked again at the next collection',
      );
      return undefined;
    }
  }

  /** Keeps in Redis what was read so far (the usage store took it), and forgets the proxies that are gone. */
  async commit(): Promise<void> {
    if (!this.#holding) return;
    const present = this.#present;
    const set = new Map<string, { identity: string; counts: Record<string, number> }>();
    for (const uid of this.#moved) {
      const baseline = this.#growth.baseline(uid);
      if (baseline) set.set(uid, baseline);
    }
    const gone = present ? [...this.#stored].filter((uid) => !present.has(uid)) : [];
    if (set.size === 0 && gone.length === 0) return;
    let kept: boolean;
    try {
      kept = await this.options.baselines.commit(this.provider, set, gone, AbortSignal.timeout(STEP_TIMEOUT_MS));
    } catch (err) {
      // Kept in memory and written at the next commit; a worker restarting before then reads that much again.
      this.options.logger.warn({ provider: this.provider, err: (err as Error).message }, 'could not keep the remote traffic baselines in Redis');
      return;
    }
    if (!kept) {
      this.#holding = false;
      this.options.logger.info({ provider: this.provider }, 'another worker collects the remote proxies’ traffic now');
      return;
    }
    this.#moved.clear();
    this.#writer = { id: this.options.baselines.claimant };
    for (const uid of set.keys()) this.#stored.add(uid);
    for (const uid of gone) {
      this.#stored.delete(uid);
      this.#growth.forget(uid);
    }
  }
}
