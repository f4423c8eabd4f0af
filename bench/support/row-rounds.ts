/**
 * The data-plane bench's request rows in rounds: every row (direct, each proxy's plain HTTP and
 * CONNECT) once a round, in alternating order (forward, then backward, …), so that a machine that
 * drifts during the run weighs on every row alike. One row of 20,000 requests lasts one to five
 * seconds here, and the same row measured twice in a row moved by 1.5× in req/s and 2× in p99: a
 * row's figure is the median of its rounds, and each ratio between two rows is taken within a round
 * (the same seconds of the machine) and reported as the median of the rounds.
 */
import type { LoadMode, LoadResult } from '../data-plane-load.ts';
import { alternating, fmt, median } from '../stats.ts';

/** One row to measure: where its load goes, or why it is skipped. */
export interface RowRun {
  row: string;
  mode: LoadMode;
  port?: number;
  /** Why the row is skipped (its proxy is missing). */
  note?: string;
}

export interface Row {
  row: string;
  mode: LoadMode;
  /** `idle`, or `one core busy` (a spinning process beside the rows). */
  load: string;
  /** One result per round. */
  rounds: LoadResult[];
  /** The rounds together: the median req/s, p50 and p99; requests, errors and reconnects summed. */
  result?: LoadResult;
  note?: string;
}

/** The rounds of `rs` as one result: medians of the rates and percentiles, sums of the counts. */
function medianResult(rs: readonly LoadResult[]): LoadResult {
  const sum = (of: (r: LoadResult) => number): number => rs.reduce((n, r) => n + of(r), 0);
  return {
    requests: sum((r) => r.requests),
    errors: sum((r) => r.errors),
    reconnects: sum((r) => r.reconnects),
    seconds: sum((r) => r.seconds),
    rps: median(rs.map((r) => r.rps)),
    p50Ms: median(rs.map((r) => r.p50Ms)),
    p99Ms: median(rs.map((r) => r.p99Ms)),
  };
}

/** Measures every run of `runs` once a round for `rounds` rounds (order reversed every other round). */
export async function rowRounds(
  runs: readonly RowRun[],
  load: string,
  rounds: number,
  measure: (mode: LoadMode, port: number) => Promise<LoadResult>,
): Promise<Row[]> {
  const rows: Row[] = runs.map((r) => ({ row: r.row, mode: r.mode, load, rounds: [], ...(r.port === undefined ? { note: r.note ?? '' } : {}) }));
  const forward = runs.map((_, i) => i);
  for (let round = 0; round < rounds; round++) {
    for (const i of alternating(forward, round)) {
      const run = runs[i];
      const row = rows[i];
      if (run?.port === undefined || !row) continue;
      row.rounds.push(await measure(run.mode, run.port));
    }
  }
  return rows.map((r) => (r.rounds.length === 0 ? r : { ...r, result: medianResult(r.rounds) }));
}

/** The table of `rows`: each row's medians, with every round's req/s and p99 beside them. */
export function rowTable(rows: readonly Row[]): string[] {
  const out = ['| load | row | req/s (median) | req/s each round | p50 ms | p99 ms (median) | p99 each round | errors | connections the server closed |'];
  out.push('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    if (!r.result) out.push(`| ${r.load} | ${r.row} | n/a | | | | | ${r.note ?? ''} | |`);
    else
      out.push(
        `| ${r.load} | ${r.row} | ${fmt(r.result.rps, 0)} | ${r.rounds.map((x) => fmt(x.rps, 0)).join(', ')} | ${fmt(r.result.p50Ms)} | ` +
          `${fmt(r.result.p99Ms)} | ${r.rounds.map((x) => fmt(x.p99Ms)).join(', ')} | ${r.result.errors} | ${r.result.reconnects} |`,
      );
  }
  return out;
}

/** Round by round, `a`'s figure over `b`'s (the same round: the same state of the machine). */
function perRound(a: Row, b: Row, of: (r: LoadResult) => number): number[] {
  return a.rounds.map((r, i) => {
    const other = b.rounds[i];
    return other ? of(r) / of(other) : NaN;
  });
}

/**
 * Issue 27's targets per load and mode, each ratio the median of its rounds' (each round's egress
 * against the same round's tinyproxy or direct): egress ≥ tinyproxy in req/s at ≤ 1.5× its p99;
 * plain HTTP ≥ 0.3× direct. (Issue 25's, accounting on ≥ 0.95× off, is read from the paired table.)
 */
export function verdicts(rows: readonly Row[]): string[] {
  const out: string[] = [];
  const said = (xs: number[]): string => `${fmt(median(xs))}× (rounds ${xs.map((x) => fmt(x)).join(', ')})`;
  for (const load of ['idle', 'one core busy']) {
    const find = (prefix: string, mode: LoadMode): Row | undefined =>
      rows.find((r) => r.load === load && r.mode === mode && r.row.startsWith(prefix) && r.rounds.length > 0);
    const direct = find('direct', 'direct');
    for (const mode of ['proxy', 'connect'] as const) {
      const egress = find('egress local proxy', mode);
      const tiny = find('tinyproxy', mode);
      if (!egress || !tiny) continue;
      const label = mode === 'proxy' ? 'plain HTTP' : 'CONNECT';
      out.push(
        `${load}, ${label}: egress/tinyproxy req/s ${said(perRound(egress, tiny, (r) => r.rps))}, p99 ${said(perRound(egress, tiny, (r) => r.p99Ms))}` +
          (mode === 'proxy' && direct ? `; egress/direct ${said(perRound(egress, direct, (r) => r.rps))}` : ''),
      );
    }
  }
  return out;
}
