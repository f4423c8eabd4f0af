/**
 * Client-side dead-peer detection. After `intervalMs` without any received packet a PING is sent;
 * if nothing at all arrives within `timeoutMs` after it, the peer is declared dead. Receiving
 * costs one timestamp write (`touch`); a single timer re-arms itself from that timestamp.
 */
import { performance } from 'node:perf_hooks';
import { KeepaliveTimeoutError } from './errors.ts';

export interface KeepaliveOptions {
  /** Silence before a PING is sent. Default 15 000 ms. */
  intervalMs?: number;
  /** Time after a PING within which something must arrive. Default 10 000 ms. */
  timeoutMs?: number;
}

export const DEFAULT_KEEPALIVE = { intervalMs: 15_000, timeoutMs: 10_000 } as const;

export class KeepaliveMonitor {
  private lastRx = performance.now();
  private pingSentAt = -1;
  private suspended = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly intervalMs: number;
  private readonly timeoutMs: number;

  constructor(
    options: KeepaliveOptions,
    private readonly sendPing: () => void,
    private readonly onDead: (err: KeepaliveTimeoutError) => void,
  ) {
    this.intervalMs = options.intervalMs ?? DEFAULT_KEEPALIVE.intervalMs;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_KEEPALIVE.timeoutMs;
  }

  start(): void {
    this.lastRx = performance.now();
    this.arm(this.intervalMs);
  }

  /** Any received packet counts as life. */
  touch(): void {
    this.lastRx = performance.now();
  }

  /** While this client deliberately does not read, silence proves nothing: no PINGs, no verdict. */
  suspend(): void {
    this.suspended = true;
    this.pingSentAt = -1;
  }

  resume(): void {
    this.suspended = false;
    this.touch();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.tick(), Math.max(1, Math.ceil(ms)));
    this.timer.unref();
  }

  private tick(): void {
    this.timer = undefined;
    if (this.suspended) {
      this.arm(this.intervalMs);
      return;
    }
    const now = performance.now();
    if (this.pingSentAt >= 0) {
      if (this.lastRx >= this.pingSentAt) {
        this.pingSentAt = -1;
      } else if (now - this.pingSentAt >= this.timeoutMs) {
        this.onDead(new KeepaliveTimeoutError(this.timeoutMs));
        return;
      } else {
        this.arm(this.pingSentAt + this.timeoutMs - now);
        return;
      }
    }
    const idle = now - this.lastRx;
    if (idle >= this.intervalMs) {
      this.pingSentAt = now;
      this.sendPing();
      // Re-check after the shorter of the two: an answered PING lets the idle clock run again.
      this.arm(Math.min(this.timeoutMs, this.intervalMs));
    } else {
      this.arm(this.intervalMs - idle);
    }
  }
}
