/** Types of the host pool's surface. */
import type { Logger } from '../../logging.ts';
import type { KvmPoolMetrics } from './metrics.ts';

/** What the pool needs of a connection. */
export interface PoolConnection {
  readonly closed: boolean;
  onClose(listener: (reason: Error) => void): void;
  /** Polite close; must not reject. */
  close(): Promise<void>;
  /** Immediate teardown, when the connection has one (used when its state is unknown). */
  destroy?(err?: Error): void;
}

export type Dial<H, C> = (host: H, signal: AbortSignal) => Promise<C>;
export type PoolFn<C, T> = (conn: C, signal: AbortSignal) => Promise<T>;

export interface HostPoolOptions<H extends { name: string }, C extends PoolConnection> {
  dial: Dial<H, C>;
  logger: Logger;
  /** Identity of a host in the pool. Default `host.name` (give provider-qualified names if two providers share a pool). */
  keyOf?: (host: H) => string;
  metrics?: KvmPoolMetrics;
  /** Connections with nothing running for this long are closed. Default 300 000 ms; 0 = never. */
  idleTimeoutMs?: number;
  /** Upper bound of one dial, on top of the caller's signal. Default 60 000 ms. */
  dialTimeoutMs?: number;
  /** Bound on `close()` waiting for connections to close politely. Default 5 000 ms. */
  closeTimeoutMs?: number;
  /** How long an abandoned probe may keep waiting before its connection is dropped (and redialled by the next caller). Default 60 000 ms. */
  probeReclaimMs?: number;
}

export interface HostPoolHostStats {
  host: string;
  connected: boolean;
  /** fns running (abandoned probes included). */
  active: number;
  dialing: boolean;
  /** Callers waiting for the dial slot. */
  waiting: number;
  abandonedProbe: boolean;
}
