import { Agent } from 'node:http';
import type { UpstreamLimits } from './types.ts';

export const UPSTREAM_LIMITS: UpstreamLimits = { perDestination: 256, idlePerDestination: 64, total: 1024, idleMs: 4_000 };

/**
 * The keep-alive pool plain-HTTP requests go out through, one per generation: `current()` closes
 * the old pool's idle sockets (requests still on one finish there) and starts a new pool when the
 * generation changed since the last call.
 */
export function upstreamAgents(generation: () => number, limits: UpstreamLimits = UPSTREAM_LIMITS): { current(): Agent; destroy(): void } {
  const make = (): Agent =>
    new Agent({
      keepAlive: true,
      maxSockets: limits.perDestination,
      maxFreeSockets: limits.idlePerDestination,
      maxTotalSockets: limits.total,
      timeout: limits.idleMs,
      scheduling: 'lifo',
    });
  let seen = generation();
  let agent = make();
  return {
    current() {
      const now = generation();
      if (now !== seen) {
        agent.destroy();
        agent = make();
        seen = now;
      }
      return agent;
    },
    destroy: () => agent.destroy(),
  };
}
