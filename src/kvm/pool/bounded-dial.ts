/**
 * One dial of a host for the pool: bounded by the caller's signal, the pool's lifetime and the dial
 * timeout; counted and logged by stage and outcome. A dial that our own bound ended (not the caller)
 * fails as a DialTimeoutError naming the stage it was in. Nothing is cached: the next caller dials again.
 */
import type { Logger } from '../../logging.ts';
import { DialError, DialTimeoutError } from '../dial.ts';
import { PoolClosedError } from './errors.ts';
import type { KvmPoolMetrics } from './metrics.ts';
import type { Dial, PoolConnection } from './types.ts';

export interface DialEnv<H, C> {
  dial: Dial<H, C>;
  /** Upper bound of one dial, on top of the caller's signal. */
  timeoutMs: number;
  /** Ends when the pool closes. */
  lifetime: AbortSignal;
  logger: Logger;
  metrics: KvmPoolMetrics | undefined;
}

/** `name`: the host's name in the pool (metrics, logs). */
export async function boundedDial<H, C extends PoolConnection>(env: DialEnv<H, C>, host: H, name: string, signal: AbortSignal): Promise<C> {
  const bound = AbortSignal.timeout(env.timeoutMs);
  const dialSignal = AbortSignal.any([signal, env.lifetime, bound]);
  const started = performance.now();
  try {
    const conn = await env.dial(host, dialSignal);
    env.metrics?.dials.inc({ host: name, stage: 'ok', outcome: 'ok' });
    env.logger.debug({ host: name, ms: Math.round(performance.now() - started) }, 'dialled KVM host');
    if (env.lifetime.aborted) {
      void conn.close();
      throw new PoolClosedError();
    }
    return conn;
  } catch (err) {
    if (err instanceof PoolClosedError) throw err;
    const stage = err instanceof DialError ? err.stage : 'unknown';
    const outcome = dialSignal.aborted ? 'aborted' : 'error';
    env.metrics?.dials.inc({ host: name, stage, outcome });
    if (env.lifetime.aborted) throw new PoolClosedError();
    // Ended by our own bound rather than the caller: say so, with the stage it was in.
    const failure = err instanceof DialError && bound.aborted && !signal.aborted ? new DialTimeoutError(err, env.timeoutMs) : err;
    env.logger.warn({ host: name, stage, outcome, err: failure }, 'KVM host dial failed');
    throw failure;
  }
}
