/**
 * The pool's bookkeeping of one host: its current connection and the scope its fns run under, how
 * many fns run on it, whether an abandoned probe still waits on it, and the idle timer that closes
 * it once nothing has run for a while. Detaching a connection (forget) aborts its scope.
 */
import type { Logger } from '../../logging.ts';
import { PoolClosedError } from './errors.ts';
import type { KvmPoolMetrics } from './metrics.ts';
import { Slot } from './slot.ts';
import type { PoolConnection } from './types.ts';

/** A live connection and the signal that ends when it is dropped or closes. */
export interface Acquired<C> {
  conn: C;
  scope: AbortSignal;
}

/** What every entry of a pool shares. */
export interface EntryEnv {
  logger: Logger;
  metrics: KvmPoolMetrics | undefined;
  /** Connections with nothing running for this long are closed; 0 = never. */
  idleTimeoutMs: number;
  /** True once the pool is closing. */
  closed(): boolean;
}

export class HostEntry<H extends { name: string }, C extends PoolConnection> {
  readonly name: string;
  /** The latest config of the host: used for the next dial. */
  host: H;
  /** One dial at a time per host. */
  readonly slot = new Slot();
  conn: C | undefined;
  /** Aborted when `conn` is dropped or closes; bounds the fns running on it. */
  private scope: AbortController | undefined;
  /** fns running (abandoned probes included). */
  active = 0;
  abandonedProbe = false;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    host: H,
    private readonly env: EntryEnv,
  ) {
    this.name = host.name;
    this.host = host;
  }

  get connected(): boolean {
    return this.conn !== undefined && !this.conn.closed;
  }

  /** The connection when it is live. */
  live(): Acquired<C> | undefined {
    if (this.conn && !this.conn.closed && this.scope && !this.scope.signal.aborted) return { conn: this.conn, scope: this.scope.signal };
    return undefined;
  }

  /** Counts a caller in (active) and stops the idle timer. */
  enter(got: Acquired<C>): Acquired<C> {
    this.active++;
    this.stopIdleTimer();
    return got;
  }

  /** Counts a caller out; the last one out starts the idle timer. */
  release(): void {
    this.active--;
    if (this.active > 0 || !this.conn || this.env.closed() || this.env.idleTimeoutMs <= 0) return;
    const conn = this.conn;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.active > 0 || this.conn !== conn) return;
      this.env.logger.debug({ host: this.name, idleMs: this.env.idleTimeoutMs }, 'closing idle KVM host connection');
      this.forget(new PoolClosedError());
      void conn.close();
    }, this.env.idleTimeoutMs);
    this.idleTimer.unref();
  }

  /** Makes `conn` the host's connection; returns the scope its fns run under. */
  install(conn: C): AbortSignal {
    const scope = new AbortController();
    this.conn = conn;
    this.scope = scope;
    this.env.metrics?.openConnections.inc();
    conn.onClose((reason) => {
      this.env.metrics?.openConnections.dec();
      if (this.conn === conn) {
        this.env.logger.info({ host: this.name, reason: reason.message }, 'KVM host connection closed');
        this.forget(reason);
      }
      scope.abort(reason);
    });
    return scope.signal;
  }

  /** Drops `conn` now (its state is unknown): destroyed, the next caller redials. */
  drop(conn: C, reason: Error): void {
    if (this.conn === conn) {
      this.env.logger.warn({ host: this.name, reason: reason.message }, 'dropping KVM host connection after an interrupted call');
      this.forget(reason);
    }
    if (conn.destroy) conn.destroy(reason);
    else void conn.close();
  }

  /** Detaches the current connection (does not close it). */
  forget(reason: Error): void {
    const scope = this.scope;
    this.conn = undefined;
    this.scope = undefined;
    this.stopIdleTimer();
    scope?.abort(reason);
  }

  stopIdleTimer(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }
}
