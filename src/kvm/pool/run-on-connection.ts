/**
 * What a caller's abort does to work on a host's connection. A call's fn gets the caller's signal; an
 * abort while it runs rejects the caller at once and drops the connection (what the host did is
 * unknown). A probe's fn gets a signal that ends only when the connection is dropped or closed; an
 * abort rejects the caller at once but leaves fn running on the KEPT connection, as the host's one
 * abandoned probe: a second probe timing out alongside it has its fn aborted instead, and one still
 * waiting `probeReclaimMs` later is reclaimed (ProbeReclaimedError, the connection dropped).
 */
import { toError } from '../../errors.ts';
import type { Logger } from '../../logging.ts';
import { callerAbortError, ProbeReclaimedError, type PoolMode } from './errors.ts';
import type { Acquired, HostEntry } from './host-entry.ts';
import type { KvmPoolMetrics } from './metrics.ts';
import type { PoolConnection, PoolFn } from './types.ts';

export interface RunEnv {
  logger: Logger;
  metrics: KvmPoolMetrics | undefined;
  /** How long an abandoned probe may keep waiting before its connection is dropped. */
  probeReclaimMs: number;
}

/** Runs fn on an acquired connection (the caller is already counted in entry.active; counted out when fn settles). */
export function runOnConnection<H extends { name: string }, C extends PoolConnection, T>(
  env: RunEnv,
  mode: PoolMode,
  entry: HostEntry<H, C>,
  got: Acquired<C>,
  fn: PoolFn<C, T>,
  signal: AbortSignal,
): Promise<T> {
  const { conn, scope } = got;
  const gauge = env.metrics?.callsInFlight;
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
        if (!abortedAtStart) entry.drop(conn, err);
      } else if (!entry.abandonedProbe) {
        entry.abandonedProbe = true;
        abandonedByUs = true;
        env.logger.warn({ host: entry.name }, 'KVM probe abandoned at its deadline; the connection is kept');
        reclaim = setTimeout(() => {
          const why = new ProbeReclaimedError(entry.name, env.probeReclaimMs);
          own?.abort(why);
          entry.drop(conn, why);
        }, env.probeReclaimMs);
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
      entry.release();
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
