/*
 * Rows of a usage query from what a store read: traffic cells of the periods that cover the window
 * and the lives that overlap it. Shared by every store, so they answer alike. Pure.
 */
import { addCost, costOf, roundCost, zeroCost, type PriceTable } from './prices.ts';
import { lifeId, lifeSecondsWithin, type StoredLife } from './instance-lives.ts';
import { NO_POOL, type UsageQuery, type UsageReport, type UsageRow, type UsageTotals } from './usage-store.ts';
import { addTraffic, emptyTraffic, type TrafficCounts } from './usage-types.ts';
import { checkWindow, daysOfWindow } from './usage-window.ts';

/** Summed traffic of one period of the window: a pool's or a domain's on one provider. */
export interface TrafficCell {
  /** The UTC day of the period. */
  day: string;
  /** The pool ('' for none) or the domain. */
  group: string;
  provider: string;
  counts: TrafficCounts;
}

interface RowParts {
  row: UsageRow;
  lives: Set<string>;
  /** By provider: bytes and instance seconds by machine type, for the cost. */
  byProvider: Map<string, { bytes: number; seconds: Record<string, number> }>;
}

function emptyRow(day: string, key: string): UsageRow {
  return { day, key, ...emptyTraffic(), instanceSeconds: 0, instances: 0, cost: zeroCost() };
}

/** Whether rows grouped so carry traffic (by location or machine type they carry instance time only). */
export function groupsTraffic(groupBy: UsageQuery['groupBy']): boolean {
  return groupBy !== 'location' && groupBy !== 'machineType';
}

/** The row a life's time counts in: its pool, its provider, or its provider and location or machine type. */
function lifeKey(groupBy: UsageQuery['groupBy'], life: StoredLife): string {
  if (groupBy === 'pool') return poolKey(life.pool);
  if (groupBy === 'location') return `${life.provider}/${life.location || '-'}`;
  if (groupBy === 'machineType') return `${life.provider}/${life.machineType || '-'}`;
  return life.provider;
}

/** The pool's row key. */
export function poolKey(pool: string | undefined): string {
  return pool === undefined || pool === '' ? NO_POOL : pool;
}

export function buildReport(
  query: UsageQuery,
  cells: readonly TrafficCell[],
  lives: readonly StoredLife[],
  prices: PriceTable | undefined,
  nowMs: number,
): UsageReport {
  checkWindow(query.from, query.to);
  const fromMs = query.from.getTime();
  const toMs = query.to.getTime();
  const parts = new Map<string, RowParts>();
  const partsOf = (day: string, key: string): RowParts => {
    const id = `${day}\u001f${key}`;
    let p = parts.get(id);
    if (!p) parts.set(id, (p = { row: emptyRow(day, key), lives: new Set(), byProvider: new Map() }));
    return p;
  };
  const usageOf = (p: RowParts, provider: string): { bytes: number; seconds: Record<string, number> } => {
    let u = p.byProvider.get(provider);
    if (!u) p.byProvider.set(provider, (u = { bytes: 0, seconds: {} }));
    return u;
  };
  for (const cell of groupsTraffic(query.groupBy) ? cells : []) {
    const key = query.groupBy === 'pool' ? poolKey(cell.group) : query.groupBy === 'provider' ? cell.provider : cell.group;
    const p = partsOf(cell.day, key);
    addTraffic(p.row, cell.counts);
    usageOf(p, cell.provider).bytes += cell.counts.bytesUp + cell.counts.bytesDown;
  }
  const allLives = new Set<string>();
  if (query.groupBy !== 'domain') {
    const days = daysOfWindow(fromMs, toMs);
    for (const life of lives) {
      const key = lifeKey(query.groupBy, life);
      for (const d of days) {
        const seconds = lifeSecondsWithin(life, d.startMs, d.endMs, nowMs);
        if (seconds <= 0) continue;
        const p = partsOf(d.day, key);
        p.row.instanceSeconds += seconds;
        p.lives.add(lifeId(life));
        allLives.add(lifeId(life));
        const u = usageOf(p, life.provider);
        const machineType = life.machineType ?? '';
        u.seconds[machineType] = (u.seconds[machineType] ?? 0) + seconds;
      }
    }
  }
  const totals: UsageTotals = { ...emptyTraffic(), instanceSeconds: 0, instances: allLives.size, cost: zeroCost() };
  const rows = [...parts.values()]
    .map((p) => {
      p.row.instances = p.lives.size;
      for (const [provider, u] of p.byProvider) addCost(p.row.cost, costOf({ provider, instanceSeconds: u.seconds, bytes: u.bytes }, prices));
      addTraffic(totals, p.row);
      totals.instanceSeconds += p.row.instanceSeconds;
      addCost(totals.cost, p.row.cost);
      p.row.instanceSeconds = Math.round(p.row.instanceSeconds);
      p.row.cost = roundCost(p.row.cost);
      return p.row;
    })
    .sort((a, b) => (a.day === b.day ? (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) : a.day < b.day ? -1 : 1));
  totals.instanceSeconds = Math.round(totals.instanceSeconds);
  totals.cost = roundCost(totals.cost);
  return { from: query.from.toISOString(), to: query.to.toISOString(), groupBy: query.groupBy, currency: prices?.currency ?? null, rows, totals };
}

/** A pool's bytes and cost in [from, to), from its traffic cells (grouped by pool) and its lives. */
export function poolUsageOf(
  pool: string,
  from: Date,
  to: Date,
  cells: readonly TrafficCell[],
  lives: readonly StoredLife[],
  prices: PriceTable | undefined,
  nowMs: number,
): { bytes: number; cost: number } {
  const report = buildReport(
    { from, to, groupBy: 'pool' },
    cells.filter((c) => c.group === pool),
    lives.filter((l) => l.pool === pool),
    prices,
    nowMs,
  );
  return { bytes: report.totals.bytesUp + report.totals.bytesDown, cost: report.totals.cost.total };
}
