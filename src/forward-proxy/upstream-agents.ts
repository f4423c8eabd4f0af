import { Agent } from 'node:http';
import { OriginPool } from './origin-pool.ts';
import { CONNECT_TIMEOUT_MS } from './tunnel.ts';
import type { UpstreamLimits } from './types.ts';

export const UPSTREAM_LIMITS: UpstreamLimits = { perDestination: 256, idlePerDestination: 64, total: 1024, idleMs: 4_000 };

/** An upstream that sends nothing for this long (no response head, or a pause in its body) is given up: 504 before the head. */
export const UPSTREAM_IDLE_MS = 60_000;

/** A generation's keep-alive connections: the origin pool (straight to destinations) and node's Agent (to an http:// hop). */
export interface UpstreamPools {
  readonly origins: OriginPool;
  readonly agent: Agent;
}

/**
 * The keep-alive pools plain-HTTP requests go out through, one pair per generation: `current()`
 * closes the old pools' idle connections (requests still on one finish there) and starts new
 * pools when the generation changed since the last call.
 */
export function upstreamAgents(generation: () => number, limits: UpstreamLimits = UPSTREAM_LIMITS): { current(): UpstreamPools; destroy(): void } {
  const make = (): UpstreamPools => ({
    origins: new OriginPool(limits, { connectMs: CONNECT_TIMEOUT_MS, idleMs: UPSTREAM_IDLE_MS }),
    agent: new Agent({
      keepAlive: true,
      maxSockets: limits.perDestination,
      maxFreeSockets: limits.idlePerDestination,
      maxTotalSockets: limits.total,
      timeout: limits.idleMs,
      scheduling: 'lifo',
    }),
  });
  let seen = generation();
  let pools = make();
  return {
    current() {
      const now = generation();
      if (now !== seen) {
        pools.origins.retire();
        pools.agent.destroy();
        pools = make();
        seen = now;
      }
      return pools;
    },
    destroy: () => {
      pools.origins.destroy();
      pools.agent.destroy();
    },
  };
}
