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
 *
 * One host's bookkeeping is host-entry.ts, a dial bounded-dial.ts, the abort rules of call and probe
 * run-on-connection.ts.
 */
import type { Logger } from '../../logging.ts';
import { boundedDial, type DialEnv } from './bounded-dial.ts';
import { callerAbortError, PoolClosedError, ProbeBusyError, type PoolMode } from './errors.ts';
import { HostEntry, type Acquired, type EntryEnv } from './host-entry.ts';
import { runOnConnection, type RunEnv } from './run-on-connection.ts';
import type { HostPoolHostStats, HostPoolOptions, PoolConnection, PoolFn } from './types.ts';

export class HostPool<H extends { name: string }, C extends PoolConnection> {
  private readonly entries = new Map<string, HostEntry<H, C>>();
  private readonly lifetime = new AbortController();
  private readonly keyOf: (host: H) => string;
  private readonly closeTimeoutMs: number;
  private readonly entryEnv: EntryEnv;
  private readonly dialEnv: DialEnv<H, C>;
  private readonly runEnv: RunEnv;
  private closing: Promise<void> | undefined;

  constructor(options: HostPoolOptions<H, C>) {
    const logger: Logger = options.logger;
    const metrics = options.metrics;
    this.keyOf = options.keyOf ?? ((host) => host.name);
    this.closeTimeoutMs = options.closeTimeoutMs ?? 5_000;
    this.entryEnv = { logger, metrics, idleTimeoutMs: options.idleTimeoutMs ?? 300_000, closed: () => this.closed };
    this.dialEnv = { dial: options.dial, timeoutMs: options.dialTimeoutMs ?? 60_000, lifetime: this.lifetime.signal, logger, metrics };
    this.runEnv = { logger, metrics, probeReclaimMs: options.probeReclaimMs ?? 60_000 };
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
      connected: e.connected,
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
        entry.stopIdleTimer();
        if (entry.conn) conns.push(entry.conn);
        entry.forget(new PoolClosedError());
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
    const live = entry.live();
    if (live) return runOnConnection(this.runEnv, mode, entry, entry.enter(live), fn, signal);
    return this.acquire(entry, mode, signal).then((got) => runOnConnection(this.runEnv, mode, entry, got, fn, signal));
  }

  /** The live connection of the host, dialled if needed. Counts the caller in entry.active. */
  private async acquire(entry: HostEntry<H, C>, mode: PoolMode, signal: AbortSignal): Promise<Acquired<C>> {
    const live = entry.live();
    if (live) return entry.enter(live);
    const waitSignal = AbortSignal.any([signal, this.lifetime.signal]);
    try {
      await entry.slot.acquire(waitSignal);
    } catch {
      throw this.closed ? new PoolClosedError() : callerAbortError(entry.name, mode, signal);
    }
    try {
      const again = entry.live();
      if (again) return entry.enter(again);
      if (this.closed) throw new PoolClosedError();
      if (signal.aborted) throw callerAbortError(entry.name, mode, signal);
      const conn = await boundedDial(this.dialEnv, entry.host, entry.name, signal);
      const scope = entry.install(conn);
      return entry.enter({ conn, scope });
    } finally {
      entry.slot.release();
    }
  }

  private entry(host: H): HostEntry<H, C> {
    const key = this.keyOf(host);
    let entry = this.entries.get(key);
    if (!entry) {
      entry = new HostEntry<H, C>(host, this.entryEnv);
      this.entries.set(key, entry);
    } else {
      entry.host = host; // the latest config is used for the next dial
    }
    return entry;
  }
}
