import { join } from 'node:path';
import type { Logger } from '../../logging.ts';
import { asCounts, asIdentity, statsFileOutlet, type StatsIdentity } from './stats-file.ts';

/**
 * What a front (an `upstream` provider's instance) sent through its upstream proxy, counted in the
 * proxy host and exported by the worker (src/providers/upstream/upstream-metrics.ts): cumulative
 * counts since the front started in `<instanceDir>/upstream-stats.json` (`{pid, startedAt,
 * failures: {kind: n}, sentBytes, receivedBytes}`, written atomically, at most every `flushMs`:
 * stats-file.ts). Bundled into the proxy program: no prom-client here.
 */
export const UPSTREAM_STATS_FILE = 'upstream-stats.json';

export interface UpstreamStats extends StatsIdentity {
  /** Requests and tunnels the upstream failed, by kind (upstream-failure.ts: `upstream-auth`, `refused`, `timeout`…). */
  failures: Record<string, number>;
  /** Bytes sent to and received from the upstream (tunnels' both ways after the hop's handshake, plain requests' heads and bodies). */
  sentBytes: number;
  receivedBytes: number;
}

export function asUpstreamStats(value: unknown): UpstreamStats | undefined {
  const identity = asIdentity(value);
  if (!identity) return undefined;
  const { failures, sentBytes, receivedBytes } = value as Record<string, unknown>;
  const counts = asCounts(failures);
  if (!counts || typeof sentBytes !== 'number' || typeof receivedBytes !== 'number') return undefined;
  return { ...identity, failures: counts, sentBytes, receivedBytes };
}

export interface UpstreamStatsRecorder {
  failure(kind: string): void;
  traffic(sent: number, received: number): void;
  flush(): Promise<void>;
}

/** The proxy host's side: counts in memory, written to the stats file shortly after they change. */
export function createUpstreamStatsRecorder(dir: string, identity: StatsIdentity, logger: Logger, flushMs = 100): UpstreamStatsRecorder {
  const stats: UpstreamStats = { ...identity, failures: {}, sentBytes: 0, receivedBytes: 0 };
  const outlet = statsFileOutlet(join(dir, UPSTREAM_STATS_FILE), () => stats, logger, 'upstream counts', flushMs);
  return {
    failure(kind) {
      stats.failures[kind] = (stats.failures[kind] ?? 0) + 1;
      outlet.changed();
    },
    traffic(sent, received) {
      stats.sentBytes += sent;
      stats.receivedBytes += received;
      outlet.changed();
    },
    flush: outlet.flush,
  };
}
