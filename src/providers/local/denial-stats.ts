import { join } from 'node:path';
import type { Logger } from '../../logging.ts';
import { asCounts, asIdentity, statsFileOutlet, type StatsIdentity } from './stats-file.ts';

/**
 * Refused destinations of local proxies, counted where they happen and exported by the worker.
 *
 * Each proxy process keeps cumulative counts per reason since it started in
 * `<instanceDir>/egress-denials.json` (`{pid, startedAt, denied: {reason: n}}`, written
 * atomically, at most every `flushMs`: stats-file.ts); the worker turns them into a metric (denied-metric.ts).
 * This module is bundled into the proxy program: it must not import prom-client.
 */
export const DENIAL_STATS_FILE = 'egress-denials.json';

export interface DenialStats extends StatsIdentity {
  denied: Record<string, number>;
}

export function asDenialStats(value: unknown): DenialStats | undefined {
  const identity = asIdentity(value);
  const denied = asCounts((value as { denied?: unknown } | undefined)?.denied);
  return identity && denied ? { ...identity, denied } : undefined;
}

export interface DenialRecorder {
  /** Counts `n` (default 1) refusals for `reason`. */
  record(reason: string, n?: number): void;
  flush(): Promise<void>;
}

/** The proxy process's side: counts in memory, written to the stats file shortly after they change. */
export function createDenialRecorder(dir: string, identity: StatsIdentity, logger: Logger, flushMs = 100): DenialRecorder {
  const denied: Record<string, number> = {};
  const outlet = statsFileOutlet(join(dir, DENIAL_STATS_FILE), (): DenialStats => ({ ...identity, denied }), logger, 'denial counts', flushMs);
  return {
    record(reason, n = 1) {
      denied[reason] = (denied[reason] ?? 0) + n;
      outlet.changed();
    },
    flush: outlet.flush,
  };
}
