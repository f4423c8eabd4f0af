import { join } from 'node:path';
import type { Logger } from '../../logging.ts';
import { writeJsonAtomic } from './instance-files.ts';

/**
 * Refused destinations of local proxies, counted where they happen and exported by the worker.
 *
 * Each proxy process keeps cumulative counts per reason since it started in
 * `<instanceDir>/egress-denials.json` (`{pid, startedAt, denied: {reason: n}}`, written
 * atomically, at most every `flushMs`); the worker turns them into a metric (denied-metric.ts).
 * This module is bundled into the proxy program: it must not import prom-client.
 */
export const DENIAL_STATS_FILE = 'egress-denials.json';

export interface DenialStats {
  pid: number;
  startedAt: string;
  denied: Record<string, number>;
}

export function asDenialStats(value: unknown): DenialStats | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { pid, startedAt, denied } = value as Record<string, unknown>;
  if (typeof pid !== 'number' || typeof startedAt !== 'string' || typeof denied !== 'object' || denied === null) return undefined;
  const counts: Record<string, number> = {};
  for (const [reason, n] of Object.entries(denied)) if (typeof n === 'number' && Number.isFinite(n) && n >= 0) counts[reason] = n;
  return { pid, startedAt, denied: counts };
}

export interface DenialRecorder {
  /** Counts `n` (default 1) refusals for `reason`. */
  record(reason: string, n?: number): void;
  flush(): Promise<void>;
}

/** The proxy process's side: counts in memory, written to the stats file shortly after they change. */
export function createDenialRecorder(dir: string, identity: { pid: number; startedAt: string }, logger: Logger, flushMs = 100): DenialRecorder {
  const denied: Record<string, number> = {};
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();
  const flush = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const snapshot: DenialStats = { ...identity, denied: { ...denied } };
    writing = writing
      .then(() => writeJsonAtomic(join(dir, DENIAL_STATS_FILE), snapshot))
      .catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'could not write the denial counts'));
    return writing;
  };
  return {
    record(reason, n = 1) {
      denied[reason] = (denied[reason] ?? 0) + n;
      timer ??= setTimeout(() => void flush(), flushMs);
    },
    flush,
  };
}
