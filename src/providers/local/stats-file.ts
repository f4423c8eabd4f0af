import type { Logger } from '../../logging.ts';
import { writeJsonAtomic } from './instance-files.ts';

/**
 * The one way counts leave a proxy process (denials, upstream counts, traffic): kept in memory,
 * cumulative since the process started, and passed on shortly after they change (at most every
 * `flushMs`): written atomically to a file of the instance directory, or, in a relay of the proxy
 * host, sent to the host. The files carry `{pid, startedAt, ...}` so that their readers
 * (stats-growth.ts) tell a restart, which counts from zero, from growth. Bundled into the proxy
 * programs: no prom-client here.
 */

/** Who wrote a stats file: a new pid or start time is a new process, counting from zero. */
export interface StatsIdentity {
  pid: number;
  startedAt: string;
}

export interface StatsOutlet {
  /** The counts changed: pass them on within `flushMs` (one timer however many changes come meanwhile). */
  changed: () => void;
  /** Passes them on now (and waits for the write, after any write begun before it). */
  flush: () => Promise<void>;
}

/** Runs `pass` at most every `flushMs` after a change, one run at a time, in order. */
export function debouncedOutlet(pass: () => Promise<void>, flushMs: number): StatsOutlet {
  let timer: NodeJS.Timeout | undefined;
  let passing: Promise<void> = Promise.resolve();
  const flush = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    passing = passing.then(pass);
    return passing;
  };
  return {
    changed() {
      timer ??= setTimeout(() => void flush(), flushMs);
    },
    flush,
  };
}

/**
 * Writes `snapshot()` (taken when the write begins) to `path` atomically shortly after each change;
 * a failed write is logged (`what` names the counts) and the next change writes again.
 */
export function statsFileOutlet(path: string, snapshot: () => unknown, logger: Logger, what: string, flushMs = 100): StatsOutlet {
  return debouncedOutlet(
    () => writeJsonAtomic(path, snapshot()).catch((err: unknown) => logger.warn({ err: (err as Error).message }, `could not write the ${what}`)),
    flushMs,
  );
}

/** A record of non-negative finite numbers from untrusted JSON (others dropped); undefined when it is no object. */
export function asCounts(value: unknown): Record<string, number> | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const counts: Record<string, number> = {};
  for (const [key, n] of Object.entries(value)) if (typeof n === 'number' && Number.isFinite(n) && n >= 0) counts[key] = n;
  return counts;
}

/** `{pid, startedAt}` from untrusted JSON, or undefined. */
export function asIdentity(value: unknown): StatsIdentity | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { pid, startedAt } = value as Record<string, unknown>;
  return typeof pid === 'number' && typeof startedAt === 'string' ? { pid, startedAt } : undefined;
}
