import { join } from 'node:path';
import type { Logger } from '../../logging.ts';
import { writeJsonAtomic } from './instance-files.ts';

/**
 * What a front (an `upstream` provider's instance) sent through its upstream proxy, counted in the
 * proxy host and exported by the worker (src/providers/upstream/upstream-metrics.ts): cumulative
 * counts since the front started in `<instanceDir>/upstream-stats.json` (`{pid, startedAt,
 * failures: {kind: n}, sentBytes, receivedBytes}`, written atomically, at most every `flushMs`).
 * Bundled into the proxy program: no prom-client here.
 */
export const UPSTREAM_STATS_FILE = 'upstream-stats.json';

export interface UpstreamStats {
  pid: number;
  startedAt: string;
  /** Requests and tunnels the upstream failed, by kind (upstream-failure.ts: `upstream-auth`, `refused`, `timeout`…). */
  failures: Record<string, number>;
  /** Bytes sent to and received from the upstream (tunnels' both ways, plain requests' bodies). */
  sentBytes: number;
  receivedBytes: number;
}

export function asUpstreamStats(value: unknown): UpstreamStats | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { pid, startedAt, failures, sentBytes, receivedBytes } = value as Record<string, unknown>;
  if (typeof pid !== 'number' || typeof startedAt !== 'string' || typeof failures !== 'object' || failures === null) return undefined;
  if (typeof sentBytes !== 'number' || typeof receivedBytes !== 'number') return undefined;
  const counts: Record<string, number> = {};
  for (const [kind, n] of Object.entries(failures)) if (typeof n === 'number' && Number.isFinite(n) && n >= 0) counts[kind] = n;
  return { pid, startedAt, failures: counts, sentBytes, receivedBytes };
}

export interface UpstreamStatsRecorder {
  failure(kind: string): void;
  traffic(sent: number, received: number): void;
  flush(): Promise<void>;
}

/** The proxy host's side: counts in memory, written to the stats file shortly after they change. */
export function createUpstreamStatsRecorder(dir: string, identity: { pid: number; startedAt: string }, logger: Logger, flushMs = 100): UpstreamStatsRecorder {
  const stats: UpstreamStats = { ...identity, failures: {}, sentBytes: 0, receivedBytes: 0 };
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();
  const flush = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const snapshot: UpstreamStats = { ...stats, failures: { ...stats.failures } };
    writing = writing
      .then(() => writeJsonAtomic(join(dir, UPSTREAM_STATS_FILE), snapshot))
      .catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'could not write the upstream counts'));
    return writing;
  };
  const changed = (): void => {
    timer ??= setTimeout(() => void flush(), flushMs);
  };
  return {
    failure(kind) {
      stats.failures[kind] = (stats.failures[kind] ?? 0) + 1;
      changed();
    },
    traffic(sent, received) {
      stats.sentBytes += sent;
      stats.receivedBytes += received;
      changed();
    },
    flush,
  };
}
