import { join } from 'node:path';
import type { InstanceTraffic } from '../../model/traffic.ts';
import { instanceDir, readJson, writeJsonAtomic } from './instance-files.ts';
import { StatsGrowth } from './stats-growth.ts';
import { readTrafficGrowth, trafficKey } from './traffic-growth.ts';

/**
 * The traffic collector's reader of a data directory, whose progress outlives the worker: what the
 * usage store has taken of each instance's counts is kept beside them in
 * `<instanceDir>/traffic-collected.json` (`{identity, counts}`, written after the store took a
 * collection). A worker that restarts starts each instance from there instead of from zero, so the
 * traffic a proxy carried before the restart is not stored twice. A worker that dies between the
 * store's write and this file's repeats at most that one collection.
 */
export const TRAFFIC_COLLECTED_FILE = 'traffic-collected.json';

export function asBaseline(value: unknown): { identity: string; counts: Record<string, number> } | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { identity, counts } = value as Record<string, unknown>;
  if (typeof identity !== 'string' || typeof counts !== 'object' || counts === null) return undefined;
  const kept: Record<string, number> = {};
  for (const [k, n] of Object.entries(counts)) if (typeof n === 'number' && Number.isFinite(n) && n >= 0) kept[k] = n;
  return { identity, counts: kept };
}

export class CollectedTraffic {
  readonly #growth = new StatsGrowth();
  /** Instance directories read since the last commit whose counts grew. */
  readonly #grown = new Set<string>();

  constructor(private readonly dataDir: string) {}

  /** What grew since the last read (or since the baseline on disk, for an instance not read yet by this process). */
  async read(): Promise<InstanceTraffic[]> {
    const seed = async (dir: string): Promise<void> => {
      if (this.#growth.has(trafficKey(dir))) return;
      const baseline = asBaseline(await readJson(join(dir, TRAFFIC_COLLECTED_FILE)).catch(() => undefined));
      if (baseline) this.#growth.seed(trafficKey(dir), baseline);
    };
    const grown = await readTrafficGrowth(this.#growth, this.dataDir, seed);
    for (const g of grown) this.#grown.add(instanceDir(this.dataDir, g.instance));
    return grown;
  }

  /** Records on disk that everything read so far was taken (an instance deleted meanwhile is skipped). */
  async commit(): Promise<void> {
    const dirs = [...this.#grown];
    this.#grown.clear();
    await Promise.all(
      dirs.map(async (dir) => {
        const baseline = this.#growth.baseline(trafficKey(dir));
        if (baseline) await writeJsonAtomic(join(dir, TRAFFIC_COLLECTED_FILE), baseline).catch(() => undefined);
      }),
    );
  }
}
