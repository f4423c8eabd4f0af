/**
 * Proxy readiness with hysteresis, pure (no I/O, no clock: the caller passes the time of each
 * observation). A proxy becomes ready on one successful probe; a ready proxy becomes unready only
 * after `failureThreshold` consecutive failed probes. The tracker reports each flip and how long
 * a proxy has been unready, so the caller can count it in metrics and replace it after a while.
 */
export interface ReadinessTrackerOptions {
  /** Consecutive failures that make a ready proxy unready (default 3, at least 1). */
  failureThreshold?: number;
}

export interface ProxyReadiness {
  ready: boolean;
  /** Failed probes in a row since the last success. */
  consecutiveFailures: number;
  /** Epoch ms since which the proxy has been unready (first observation for one never ready). */
  unreadySince?: number;
  /** Epoch ms of the last flip of `ready`. */
  lastTransitionAt?: number;
}

export interface Observation extends ProxyReadiness {
  proxy: string;
  /** Set when this observation flipped `ready`. */
  transition?: 'ready' | 'unready';
}

export const DEFAULT_FAILURE_THRESHOLD = 3;

export class ReadinessTracker {
  readonly failureThreshold: number;
  private readonly states = new Map<string, ProxyReadiness>();

  constructor(options: ReadinessTrackerOptions = {}) {
    const n = options.failureThreshold ?? DEFAULT_FAILURE_THRESHOLD;
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`failureThreshold must be an integer of at least 1, got ${n}`);
    this.failureThreshold = n;
  }

  /** Records one probe outcome for `proxy` at time `at` (epoch ms) and returns the new state. */
  record(proxy: string, ok: boolean, at: number): Observation {
    const previous = this.states.get(proxy) ?? { ready: false, consecutiveFailures: 0, unreadySince: at };
    const next: ProxyReadiness = { ...previous };
    let transition: Observation['transition'];
    if (ok) {
      next.consecutiveFailures = 0;
      if (!previous.ready) {
        next.ready = true;
        next.lastTransitionAt = at;
        delete next.unreadySince;
        transition = 'ready';
      }
    } else {
      next.consecutiveFailures = previous.consecutiveFailures + 1;
      if (previous.ready && next.consecutiveFailures >= this.failureThreshold) {
        next.ready = false;
        next.lastTransitionAt = at;
        next.unreadySince = at;
        transition = 'unready';
      }
    }
    this.states.set(proxy, next);
    return { proxy, ...next, ...(transition ? { transition } : {}) };
  }

  get(proxy: string): ProxyReadiness | undefined {
    const state = this.states.get(proxy);
    return state ? { ...state } : undefined;
  }

  /** Milliseconds `proxy` has been unready at time `at`; 0 when ready or unknown. */
  unreadyForMs(proxy: string, at: number): number {
    const state = this.states.get(proxy);
    if (!state || state.ready || state.unreadySince === undefined) return 0;
    return Math.max(0, at - state.unreadySince);
  }

  /** The proxies unready for at least `afterMs` at time `at`: due to be replaced. */
  dueForReplacement(afterMs: number, at: number): string[] {
    return [...this.states.keys()].filter((proxy) => {
      const state = this.states.get(proxy);
      return state !== undefined && !state.ready && this.unreadyForMs(proxy, at) >= afterMs;
    });
  }

  /** How many tracked proxies are ready and unready (for a gauge). */
  counts(): { ready: number; unready: number } {
    let ready = 0;
    for (const state of this.states.values()) if (state.ready) ready++;
    return { ready, unready: this.states.size - ready };
  }

  /** Stops tracking a proxy (deleted or replaced). */
  forget(proxy: string): void {
    this.states.delete(proxy);
  }
}
