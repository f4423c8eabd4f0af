import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { instanceDir, instancesDir, readJson } from './instance-files.ts';
import type { StatsIdentity } from './stats-file.ts';

/**
 * The reading side of stats-file.ts, for every reader in the worker (the denial, upstream and
 * traffic metrics, the traffic collector): each instance directory's file read in turn, and what
 * each count grew by since this reader last looked. A file written by a new process (another pid
 * or start time) counts from zero, so a reader's totals never go down and cover processes that
 * outlive a worker; the highest count seen is kept, so a file read half-way through a restart
 * never counts twice.
 */

interface Seen {
  identity: string;
  counts: Record<string, number>;
}

export class StatsGrowth {
  private readonly seen = new Map<string, Seen>();

  /** What each of `counts` grew by since `key` was last seen under the same `identity` (all of it after a restart); only growth (> 0). */
  grow(key: string, identity: StatsIdentity, counts: Record<string, number>): Record<string, number> {
    const id = `${identity.pid}:${identity.startedAt}`;
    const before = this.seen.get(key);
    const same = before?.identity === id;
    const merged: Record<string, number> = same ? { ...before.counts } : {};
    const growth: Record<string, number> = {};
    for (const [name, n] of Object.entries(counts)) {
      const delta = n - (same ? (before.counts[name] ?? 0) : 0);
      if (delta > 0) growth[name] = delta;
      merged[name] = Math.max(n, merged[name] ?? 0);
    }
    this.seen.set(key, { identity: id, counts: merged });
    return growth;
  }

  /** Whether `key` has been seen (or seeded) by this reader. */
  has(key: string): boolean {
    return this.seen.has(key);
  }

  /** Starts `key` from counts a reader before this one already took (a baseline kept on disk), so they are not read again. */
  seed(key: string, baseline: { identity: string; counts: Record<string, number> }): void {
    this.seen.set(key, { identity: baseline.identity, counts: { ...baseline.counts } });
  }

  /** Forgets `key` (a proxy that is gone). */
  forget(key: string): void {
    this.seen.delete(key);
  }

  /** What `key` has been read up to, as `seed` takes it back; undefined when never seen. */
  baseline(key: string): { identity: string; counts: Record<string, number> } | undefined {
    const seen = this.seen.get(key);
    return seen && { identity: seen.identity, counts: { ...seen.counts } };
  }
}

/** An instance directory of a data directory, by name. */
export interface InstanceDirEntry {
  name: string;
  dir: string;
}

/** Every instance directory under `dataDir` (none when it does not exist yet). */
export async function instanceDirs(dataDir: string): Promise<InstanceDirEntry[]> {
  return readdir(instancesDir(dataDir), { withFileTypes: true }).then(
    (entries) => entries.filter((e) => e.isDirectory()).map((e) => ({ name: e.name, dir: instanceDir(dataDir, e.name) })),
    () => [],
  );
}

/** The file `file` of `dir` as `parse` reads it; undefined when absent, unreadable or not one. */
export async function readStats<T>(dir: string, file: string, parse: (value: unknown) => T | undefined): Promise<T | undefined> {
  return parse(await readJson(join(dir, file)).catch(() => undefined));
}
