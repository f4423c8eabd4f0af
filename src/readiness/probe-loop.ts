import { EventEmitter } from 'node:events';
import pLimit from 'p-limit';
import type { Logger } from '../logging.ts';
import { withReadyCondition } from '../proxies/conditions.ts';
import { evictionCauseOf, type ProbeVerdict, type ReadinessHooks, type ReadinessProbe, type ReadinessRules } from '../proxies/readiness-contract.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { ProxyCredentialsReader, ProxyReader, ProxyStatusWriter } from '../store/proxy-store.ts';
import { recordFailure, type FailureOutcome } from './evict.ts';
import type { ProbeClaims } from './probe-claims.ts';
import { observerFailure, type ObserverResourceError } from '../observer-errors.ts';
import type { ProxyCredentials } from '../model/proxy-credentials.ts';

export interface ProbeLoopDeps {
  proxies: ProxyReader & ProxyCredentialsReader & ProxyStatusWriter;
  /** The per-proxy claims that keep one probe per proxy per interval across every worker. */
  claims: ProbeClaims;
  /** `--probe-interval`: each Ready proxy is probed about this often (±10 % jitter). */
  intervalMs: number;
  rules: ReadinessRules;
  probe: ReadinessProbe;
  requestReconcile: (proxy: string) => Promise<void>;
  hooks?: ReadinessHooks;
  logger: Logger;
  /** Probes in flight at once in this worker (default 64). */
  concurrency?: number;
  random?: () => number;
}

export interface ProbeEvent {
  proxy: string;
  provider: string;
  verdict: ProbeVerdict;
  /** What the failure did to the proxy (undefined for a pass). */
  outcome?: FailureOutcome;
}

export interface ProbeLoopEvents {
  probed: [ProbeEvent];
  /** A probe this process could not make (EMFILE, ENFILE, ENOMEM): nothing was recorded about the proxy. */
  observerError: [{ proxy: string; provider: string; error: ObserverResourceError }];
  error: [Error];
}

interface Entry {
  proxy: Proxy;
  credentials: ProxyCredentials;
  endpoint: { host: string; port: number };
  dueAt: number;
  inFlight: boolean;
}

function endpointOf(url: string): { host: string; port: number } | undefined {
  try {
    const u = new URL(url);
    const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
    return { host, port: Number(u.port || 80) };
  } catch {
    return undefined;
  }
}

/**
 * Readiness on a cadence of its own (`--probe-interval`), apart from the resync: every worker that
 * runs the reconcile queue keeps the list of Ready proxies (read again each interval) and probes
 * each one about once an interval, at a random phase with ±10 % jitter so that a fleet's probes
 * spread out (a proxy that just turned Ready: half to one interval after it did). Before a probe the worker claims the proxy (`ProbeClaims`: in Redis, one pipelined
 * round trip per tick), so among all workers one probes a proxy per interval. A pass writes nothing
 * (discovery's ETag stays) unless it clears counted failures or the egress IP moved; a failure goes
 * through `recordFailure`, which evicts on the first one by default and asks for a reconcile.
 */
export class ProbeLoop extends EventEmitter<ProbeLoopEvents> {
  readonly #deps: ProbeLoopDeps;
  readonly #entries = new Map<string, Entry>();
  readonly #abort = new AbortController();
  readonly #limit;
  readonly #random: () => number;
  #tick: NodeJS.Timeout | undefined;
  #refresh: NodeJS.Timeout | undefined;
  #refreshing: Promise<void> | undefined;
  #ticking = false;
  readonly #running = new Set<Promise<void>>();

  constructor(deps: ProbeLoopDeps) {
    super();
    this.#deps = deps;
    this.#limit = pLimit(deps.concurrency ?? 64);
    this.#random = deps.random ?? Math.random;
  }

  /** Proxies this worker currently schedules. */
  get size(): number {
    return this.#entries.size;
  }

  start(): void {
    const { intervalMs } = this.#deps;
    this.#refresh = setInterval(() => void this.refresh(), intervalMs);
    this.#tick = setInterval(() => void this.#onTick(), Math.max(20, Math.min(250, Math.floor(intervalMs / 10))));
    void this.refresh();
  }

  /** Reads the Ready proxies again (each interval; tests and benches call it to start at once). */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#load()
      .catch((err: unknown) => {
        this.#deps.logger.warn({ err: (err as Error).message }, 'probe loop: listing proxies failed; trying again next interval');
        this.emit('error', err as Error);
      })
      .finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  async #load(): Promise<void> {
    const signal = this.#abort.signal;
    const ready = (await this.#deps.proxies.list(signal)).filter(
      (p) => p.status.phase === 'Ready' && p.status.url !== undefined && !p.metadata.deletionRequestedAt,
    );
    const seen = new Set(ready.map((p) => p.name));
    for (const name of this.#entries.keys()) if (!seen.has(name)) this.#entries.delete(name);
    const fresh = ready.filter((p) => !this.#entries.has(p.name));
    const secrets =
      fresh.length > 0
        ? await this.#deps.proxies.credentialsOf(
            fresh.map((p) => p.name),
            signal,
          )
        : [];
    const now = Date.now();
    for (const p of ready) {
      const entry = this.#entries.get(p.name);
      const endpoint = endpointOf(p.status.url ?? '');
      if (entry) {
        entry.proxy = p;
        if (endpoint) entry.endpoint = endpoint;
        continue;
      }
      const credentials = secrets[fresh.indexOf(p)];
      if (!credentials || !endpoint) continue;
      this.#entries.set(p.name, { proxy: p, credentials, endpoint, dueAt: this.#firstDue(p, now), inFlight: false });
    }
  }

  /**
   * When a proxy new to this loop is first probed. One that turned Ready less than an interval ago
   * (reconcile has just probed it) is due half to one interval after that, whenever this loop reads
   * it: the list is read once an interval, and that lag must not add to the time a bad proxy stays
   * in discovery. Others (a worker that just started) get a random phase within the interval, so a
   * fleet is not probed all at once.
   */
  #firstDue(p: Proxy, now: number): number {
    const interval = this.#deps.intervalMs;
    const since = Date.parse(p.status.conditions.find((c) => c.type === 'Ready' && c.status === 'True')?.lastTransitionTime ?? '');
    if (Number.isFinite(since) && since <= now && now - since < interval) return Math.max(now, since + interval * (0.5 + 0.5 * this.#random()));
    return now + this.#random() * interval;
  }

  #nextDue(now: number): number {
    return now + this.#deps.intervalMs * (0.9 + 0.2 * this.#random());
  }

  async #onTick(): Promise<void> {
    if (this.#ticking || this.#abort.signal.aborted) return;
    this.#ticking = true;
    try {
      const now = Date.now();
      const due = [...this.#entries.values()].filter((e) => !e.inFlight && e.dueAt <= now);
      if (due.length === 0) return;
      for (const e of due) e.dueAt = this.#nextDue(now);
      // A claim lasts most of an interval: the next interval's probe, here or elsewhere, is free to claim.
      const claimed = await this.#deps.claims.claim(
        due.map((e) => e.proxy.name),
        Math.max(1, Math.floor(this.#deps.intervalMs * 0.8)),
      );
      due.forEach((entry, i) => {
        if (!claimed[i]) return;
        entry.inFlight = true;
        const run = this.#limit(() => this.#probeOne(entry)).finally(() => {
          entry.inFlight = false;
          this.#running.delete(run);
        });
        this.#running.add(run);
      });
    } catch (err) {
      if (!this.#abort.signal.aborted) this.#deps.logger.warn({ err: (err as Error).message }, 'probe loop: claiming probes failed; trying again next tick');
    } finally {
      this.#ticking = false;
    }
  }

  async #probeOne(entry: Entry): Promise<void> {
    const { proxy, endpoint, credentials } = entry;
    const signal = this.#abort.signal;
    if (signal.aborted) return;
    const provider = proxy.spec.provider;
    let verdict: ProbeVerdict;
    try {
      verdict = await this.#deps.probe(endpoint, proxy, signal, credentials);
    } catch (err) {
      if (signal.aborted) return;
      const own = observerFailure('readiness probe', err);
      if (own) {
        // Our own descriptors or memory ran out: nothing is known about the proxy; the next interval looks again.
        this.#observerError(proxy, own);
        return;
      }
      verdict = { ok: false, cause: 'error', message: (err as Error).message };
    }
    if (signal.aborted) return;
    this.#deps.hooks?.onProbe?.(provider, verdict.ok, verdict.durationSeconds);
    try {
      if (verdict.ok) {
        await this.#passed(entry, verdict.egressIp);
        this.emit('probed', { proxy: proxy.name, provider, verdict });
        return;
      }
      const outcome = await recordFailure(
        { proxies: this.#deps.proxies, rules: this.#deps.rules, hooks: this.#deps.hooks ?? {}, requestReconcile: this.#deps.requestReconcile },
        proxy.name,
        { cause: evictionCauseOf(verdict.cause), message: verdict.message, url: proxy.status.url },
        signal,
      );
      if (outcome === 'evicted') {
        this.#entries.delete(proxy.name);
        this.#deps.logger.warn(
          { proxy: proxy.name, provider, cause: evictionCauseOf(verdict.cause), err: verdict.message },
          'proxy taken out of discovery: readiness probe failed',
        );
      } else if (outcome === 'counted') {
        entry.proxy = { ...proxy, status: { ...proxy.status, probeFailures: (proxy.status.probeFailures ?? 0) + 1 } };
      }
      this.emit('probed', { proxy: proxy.name, provider, verdict, outcome });
    } catch (err) {
      if (signal.aborted) return;
      this.#deps.logger.warn({ proxy: proxy.name, err: (err as Error).message }, 'probe loop: recording a probe failed');
      this.emit('error', err as Error);
    }
  }

  #lastObserverWarning = -Infinity;
  #observerError(proxy: Proxy, err: ObserverResourceError): void {
    this.#deps.hooks?.onObserverError?.('probe', err.resource);
    this.emit('observerError', { proxy: proxy.name, provider: proxy.spec.provider, error: err });
    if (performance.now() - this.#lastObserverWarning < 60_000) return;
    this.#lastObserverWarning = performance.now();
    this.#deps.logger.warn({ proxy: proxy.name, err: err.message }, 'probe loop: out of own resources; no proxy judged by it (logged once a minute)');
  }

  /** A pass writes only when it changes something: counted failures cleared, a new egress IP. */
  async #passed(entry: Entry, egressIp: string): Promise<void> {
    const { proxy } = entry;
    if ((proxy.status.probeFailures ?? 0) === 0 && proxy.status.egressIp === egressIp) return;
    const stored = await this.#deps.proxies.updateStatus(
      proxy.name,
      (p) => {
        if (p.status.phase !== 'Ready' || p.status.url !== proxy.status.url) return undefined;
        if ((p.status.probeFailures ?? 0) === 0 && p.status.egressIp === egressIp) return undefined;
        const { lastError: _drop, ...rest } = p.status;
        return withReadyCondition({ ...rest, probeFailures: 0, egressIp }, new Date());
      },
      this.#abort.signal,
    );
    if (stored) entry.proxy = stored;
  }

  /** Stops probing; probes in flight are abandoned (their results are not recorded). */
  async close(): Promise<void> {
    if (this.#tick) clearInterval(this.#tick);
    if (this.#refresh) clearInterval(this.#refresh);
    this.#abort.abort(new Error('probe loop closed'));
    await Promise.allSettled([...this.#running, this.#refreshing]);
  }
}
