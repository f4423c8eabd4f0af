/**
 * The per-process pool of host connections: one connection per host, dialled lazily and shared
 * by every job; idle ones are closed. Generic over the connection (closed/onClose/close) and an
 * injected `dial(host, signal)`.
 *
 * - `call(host, fn, signal)`: work; fn gets the caller's signal. If the signal ends while fn
 *   runs, the caller is rejected at once and the connection is dropped (what the host did is
 *   unknown); the next caller redials. A signal that had already ended before fn started drops
 *   nothing (fn saw it and the libvirt client sends nothing on an ended signal).
 * - `probe(host, fn, signal)`: health checks; fn gets a signal that ends only when the connection
 *   is dropped or closed. If the caller's signal ends, the caller is rejected at once but fn is
 *   left running on the connection, which is KEPT (a check must not cost real work
 *   its link). At most one abandoned probe per host may still be waiting: while one is, a new
 *   probe gets ProbeBusyError at once, and a second probe timing out alongside it has its fn
 *   aborted rather than left waiting. An abandoned probe still waiting `probeReclaimMs` later is
 *   reclaimed: a connection that answers keepalives but not calls is dropped (ProbeReclaimedError)
 *   and the next caller redials, instead of every later probe being ProbeBusy for ever.
 * - Waiting for a host's dial slot is bounded by the caller's signal; an uncontended caller takes
 *   a free slot even when its signal has ended (but never starts a dial with an ended signal).
 * - A failed dial is not cached: the next caller dials again.
 */
import { toError } from '../../errors.ts';
import type { Logger } from '../../logging.ts';
import { DialError, DialTimeoutError } from '../dial.ts';
import { callerAbortError, PoolClosedError, ProbeBusyError, ProbeReclaimedError, type PoolMode } from './errors.ts';
import { Slot } from './slot.ts';
import type { Dial, HostPoolHostStats, HostPoolOptions, PoolConnection, PoolFn } from './types.ts';
import type { KvmPoolMetrics } from './metrics.ts';

interface Entry<H, C> {
  readonly name: string;
  host: H;
  readonly slot: Slot;
  conn: C | undefined;
  /** Aborted when `conn` is dropped or closes; bounds the fns running on it. */
  scope: AbortController | undefined;
  active: number;
  abandonedProbe: boolean;
  idleTimer: NodeJS.Timeout | undefined;
}

export class HostPool<H extends { name: string }, C extends PoolConnection> {
  private readonly entries = new Map<string, Entry<H, C>>();
  private readonly lifetime = new AbortController();
  private readonly dialFn: Dial<H, C>;
  private readonly keyOf: (host: H) => string;
  private readonly logger: Logger;
  private readonly metrics: KvmPoolMetrics | undefined;
  private readonly idleTimeoutMs: number;
  private readonly dialTimeoutMs: number;
  private readonly closeTimeoutMs: number;
  private readonly probeReclaimMs: number;
  private closing: Promise<void> | undefined;

  constructor(options: HostPoolOptions<H, C>) {
    this.dialFn = options.dial;
    this.keyOf = options.keyOf ?? ((host) => host.name);
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 300_000;
    this.dialTimeoutMs = options.dialTimeoutMs ?? 60_000;
    this.closeTimeoutMs = options.closeTimeoutMs ?? 5_000;
    this.probeReclaimMs = options.probeReclaimMs ?? 60_000;
  }

  get closed(): boolean {
    return this.lifetime.signal.aborted;
  }

  /** Runs `fn` on the host's connection; an abort mid-call drops the connection. */
  call<T>(host: H, fn: PoolFn<C, T>, signal: AbortSignal): Promise<T> {
    return this.run('call', host, fn, signal);
  }

  /** Runs `fn` on the host's connection; an abort abandons fn and keeps the connection. */
  probe<T>(host: H, fn: PoolFn<C, T>, signal: AbortSignal): Promise<T> {
    return this.run('probe', host, fn, signal);
  }

  stats(): HostPoolHostStats[] {
    return [...this.entries.values()].map((e) => ({
      host: e.name,
      connected: e.conn !== undefined && !e.conn.closed,
      active: e.active,
      dialing: e.slot.busy,
      waiting: e.slot.waiting,
      abandonedProbe: e.abandonedProbe,
    }));
  }

  /** Rejects new work, aborts dials and waits, closes every connection (bounded). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.lifetime.abort(new PoolClosedError());
      const conns: C[] = [];
      for (const entry of this.entries.values()) {
        clearTimeout(entry.idleTimer);
        if (entry.conn) conns.push(entry.conn);
        this.forget(entry, new PoolClosedError());
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled(conns.map((c) => c.close())),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, this.closeTimeoutMs);
        }),
      ]);
      clearTimeout(timer);
      for (const c of conns) if (!c.closed) c.destroy?.(new PoolClosedError());
    })();
    return this.closing;
  }

  private run<T>(mode: PoolMode, host: H, fn: PoolFn<C, T>, signal: AbortSignal): Promise<T> {
    if (this.closed) return Promise.reject(new PoolClosedError());
    const entry = this.entry(host);
    if (mode === 'probe' && entry.abandonedProbe) return Promise.reject(new ProbeBusyError(entry.name));
    // Fast path: a live connection needs no slot.
    const live = this.liveConn(entry);
    if (live) return this.runOn(mode, entry, this.enter(entry, live.conn, live.scope), fn, signal);
    return this.acquire(entry, mode, signal).then((got) => this.runOn(mode, entry, got, fn, signal));
  }

  /**
   * Runs fn on an acquired connection (the caller is already counted in entry.active). A call's
   * fn gets the caller's signal; a probe's fn gets a signal that ends only when the connection
   * is dropped or closed (or when it must not stay behind as a second abandoned probe).
   */
  private runOn<T>(mode: PoolMode, entry: Entry<H, C>, got: { conn: C; scope: AbortSignal }, fn: PoolFn<C, T>, signal: AbortSignal): Promise<T> {
    const { conn, scope } = got;
    const gauge = this.metrics?.callsInFlight;
    gauge?.inc({ host: entry.name, mode });
    let own: AbortController | undefined;
    let fnSignal = signal;
    if (mode === 'probe') {
      own = new AbortController();
      fnSignal = AbortSignal.any([scope, own.signal]);
    }
    const abortedAtStart = signal.aborted;
    let running: Promise<T>;
    try {
      running = fn(conn, fnSignal);
    } catch (err) {
      running = Promise.reject(toError(err));
    }
    return new Promise<T>((resolve, reject) => {
      let callerGone = false;
      let abandonedByUs = false;
      let reclaim: NodeJS.Timeout | undefined;
      const onAbort = (): void => {
        if (callerGone) return;
        callerGone = true;
        const err = callerAbortError(entry.name, mode, signal);
        if (mode === 'call') {
          // The call may or may not have reached the host: the connection's state is unknown.
          if (!abortedAtStart) this.drop(entry, conn, err);
        } else if (!entry.abandonedProbe) {
          entry.abandonedProbe = true;
          abandonedByUs = true;
          this.logger.warn({ host: entry.name }, 'KVM probe abandoned at its deadline; the connection is kept');
          reclaim = setTimeout(() => {
            const why = new ProbeReclaimedError(entry.name, this.probeReclaimMs);
            own?.abort(why);
            this.drop(entry, conn, why);
          }, this.probeReclaimMs);
          reclaim.unref();
        } else {
          own?.abort(err); // another probe is already waiting: do not leave a second one behind
        }
        reject(err);
      };
      const settled = (): void => {
        signal.removeEventListener('abort', onAbort);
        clearTimeout(reclaim);
        gauge?.dec({ host: entry.name, mode });
        if (abandonedByUs) entry.abandonedProbe = false;
        this.release(entry);
      };
      running.then(
        (value) => {
          settled();
          if (!callerGone) resolve(value);
        },
        (err: unknown) => {
          settled();
          if (!callerGone) reject(toError(err));
        },
      );
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The live connection of the host, dialled if needed. Counts the caller in entry.active. */
  private async acquire(entry: Entry<H, C>, mode: PoolMode, signal: AbortSignal): Promise<{ conn: C; scope: AbortSignal }> {
    const live = this.liveConn(entry);
    if (live) return this.enter(entry, live.conn, live.scope);
    const waitSignal = AbortSignal.any([signal, this.lifetime.signal]);
    try {
      await entry.slot.acquire(waitSignal);
    } catch {
      throw this.closed ? new PoolClosedError() : callerAbortError(entry.name, mode, signal);
    }
    try {
      const again = this.liveConn(entry);
      if (again) return this.enter(entry, again.conn, again.scope);
      if (this.closed) throw new PoolClosedError();
      if (signal.aborted) throw callerAbortError(entry.name, mode, signal);
      const conn = await this.dial(entry, signal);
      const scope = this.install(entry, conn);
      return this.enter(entry, conn, scope);
    } finally {
      entry.slot.release();
    }
  }

  private liveConn(entry: Entry<H, C>): { conn: C; scope: AbortSignal } | undefined {
    if (entry.conn && !entry.conn.closed && entry.scope && !entry.scope.signal.aborted) return { conn: entry.conn, scope: entry.scope.signal };
    return undefined;
  }

  private enter(entry: Entry<H, C>, conn: C, scope: AbortSignal): { conn: C; scope: AbortSignal } {
    entry.active++;
    clearTimeout(entry.idleTimer);
    entry.idleTimer = undefined;
    return { conn, scope };
  }

  private release(entry: Entry<H, C>): void {
    entry.active--;
    if (entry.active > 0 || !entry.conn || this.closed || this.idleTimeoutMs <= 0) return;
    const conn = entry.conn;
    clearTimeout(entry.idleTimer);
    entry.idleTimer = setTimeout(() => {
      entry.idleTimer = undefined;
      if (entry.active > 0 || entry.conn !== conn) return;
      this.logger.debug({ host: entry.name, idleMs: this.idleTimeoutMs }, 'closing idle KVM host connection');
      this.forget(entry, new PoolClosedError());
      void conn.close();
    }, this.idleTimeoutMs);
    entry.idleTimer.unref();
  }

  private async dial(entry: Entry<H, C>, signal: AbortSignal): Promise<C> {
    const bound = AbortSignal.timeout(this.dialTimeoutMs);
    const dialSignal = AbortSignal.any([signal, this.lifetime.signal, bound]);
    const started = performance.now();
    try {
      const conn = await this.dialFn(entry.host, dialSignal);
      this.metrics?.dials.inc({ host: entry.name, stage: 'ok', outcome: 'ok' });
      this.logger.debug({ host: entry.name, ms: Math.round(performance.now() - started) }, 'dialled KVM host');
      if (this.closed) {
        void conn.close();
        throw new PoolClosedError();
      }
      return conn;
    } catch (err) {
      if (err instanceof PoolClosedError) throw err;
      const stage = err instanceof DialError ? err.stage : 'unknown';
      const outcome = dialSignal.aborted ? 'aborted' : 'error';
      this.metrics?.dials.inc({ host: entry.name, stage, outcome });
      if (this.closed) throw new PoolClosedError();
      // Ended by our own bound rather than the caller: say so, with the stage it was in.
      const failure = err instanceof DialError && bound.aborted && !signal.aborted ? new DialTimeoutError(err, this.dialTimeoutMs) : err;
      this.logger.warn({ host: entry.name, stage, outcome, err: failure }, 'KVM host dial failed');
      throw failure;
    }
  }

  /** Makes `conn` the host's connection; returns the scope its fns run under. */
  private install(entry: Entry<H, C>, conn: C): AbortSignal {
    const scope = new AbortController();
    entry.conn = conn;
    entry.scope = scope;
    this.metrics?.openConnections.inc();
    conn.onClose((reason) => {
      this.metrics?.openConnections.dec();
      if (entry.conn === conn) {
        this.logger.info({ host: entry.name, reason: reason.message }, 'KVM host connection closed');
        this.forget(entry, reason);
      }
      scope.abort(reason);
    });
    return scope.signal;
  }

  /** Drops the host's connection now (its state is unknown): destroyed, the next caller redials. */
  private drop(entry: Entry<H, C>, conn: C, reason: Error): void {
    if (entry.conn === conn) {
      this.logger.warn({ host: entry.name, reason: reason.message }, 'dropping KVM host connection after an interrupted call');
      this.forget(entry, reason);
    }
    if (conn.destroy) conn.destroy(reason);
    else void conn.close();
  }

  /** Detaches the current connection from the entry (does not close it). */
  private forget(entry: Entry<H, C>, reason: Error): void {
    const scope = entry.scope;
    entry.conn = undefined;
    entry.scope = undefined;
    clearTimeout(entry.idleTimer);
    entry.idleTimer = undefined;
    scope?.abort(reason);
  }

  private entry(host: H): Entry<H, C> {
    const key = this.keyOf(host);
    let entry = this.entries.get(key);
    if (!entry) {
      entry = { name: host.name, host, slot: new Slot(), conn: undefined, scope: undefined, active: 0, abandonedProbe: false, idleTimer: undefined };
      this.entries.set(key, entry);
    } else {
      entry.host = host; // the latest config is used for the next dial
    }
    return entry;
  }
}
