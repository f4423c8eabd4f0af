/**
 * The data-plane bench's large downloads: the same download direct and through a CONNECT tunnel of
 * each proxy, in rounds of alternating order (direct first, then last, …), each proxy's ratio taken
 * against the direct download of its own round and reported as the median of the rounds. One
 * download of 1 GiB lasts about a second here, so a single pair moved by ±20 % with whatever else
 * the machine did in that second.
 */
import { runDownload, type DownloadOptions, type DownloadResult } from '../data-plane-load.ts';
import { alternating, fmt, median } from '../stats.ts';

/** A proxy the data-plane bench measures: its port, or why its rows are skipped. */
export interface BenchTarget {
  name: string;
  port?: number;
  /** Why its rows are skipped. */
  note?: string;
}

export interface DownloadRow {
  row: string;
  /** One download per round (the direct row's first); empty when skipped. */
  results: DownloadResult[];
  /** Each round's MB/s over that round's direct MB/s. */
  ratios: number[];
  note?: string;
}

const DIRECT = 'direct (no proxy)';

export async function downloadRounds(
  targets: readonly BenchTarget[],
  d: Omit<DownloadOptions, 'mode' | 'port'>,
  originPort: number,
  rounds: number,
): Promise<DownloadRow[]> {
  const rows: DownloadRow[] = [
    { row: DIRECT, results: [], ratios: [] },
    ...targets.map((t) => ({ row: `${t.name}, CONNECT`, results: [], ratios: [], ...(t.port === undefined ? { note: t.note ?? '' } : {}) })),
  ];
  const runs: { row: DownloadRow; port: number; mode: 'direct' | 'connect' }[] = [{ row: rows[0] as DownloadRow, port: originPort, mode: 'direct' }];
  targets.forEach((t, i) => {
    const row = rows[i + 1];
    if (row && t.port !== undefined) runs.push({ row, port: t.port, mode: 'connect' });
  });
  for (let round = 0; round < rounds; round++) {
    for (const run of alternating(runs, round)) {
      if (run.row.note !== undefined) continue;
      const result = await runDownload({ ...d, mode: run.mode, port: run.port }).catch((err: Error) => err.message);
      if (typeof result === 'string') run.row.note = result;
      else run.row.results.push(result);
    }
  }
  const direct = rows[0]?.results ?? [];
  for (const row of rows) row.ratios = row.results.map((r, i) => r.mbPerSecond / (direct[i]?.mbPerSecond ?? NaN));
  return rows;
}

/** The table: each row's median MB/s, every round's, and the median of its per-round ratios to direct. */
export function downloadTable(rows: readonly DownloadRow[], mib: number, rounds: number): string[] {
  const out = [
    `\n${mib} MiB download, one connection, ${rounds} rounds in alternating order; × direct: the median of each round's ratio to that round's direct download`,
    '| row | MB/s (median) | MB/s each round | × direct (median) | × direct each round |',
    '|---|---|---|---|---|',
  ];
  for (const r of rows) {
    if (r.results.length === 0) out.push(`| ${r.row} | n/a | | | ${r.note ?? ''} |`);
    else
      out.push(
        `| ${r.row} | ${fmt(median(r.results.map((x) => x.mbPerSecond)), 0)} | ${r.results.map((x) => fmt(x.mbPerSecond, 0)).join(', ')} | ` +
          `**${fmt(median(r.ratios))}** | ${r.ratios.map((x) => fmt(x)).join(', ')} |`,
      );
  }
  return out;
}
