import type { BudgetStatus, PoolBudget } from '../model/pool-resource.ts';
import type { ProxyCondition } from '../model/proxy-resource.ts';
import { parseTrafficQuantity } from '../schema/traffic-quantity.ts';
import type { PoolUsage } from '../usage/usage-types.ts';

/*
 * A pool's budget within its window, judged (pure: reconcile-pool.ts reads the usage and carries out
 * what this decides). Windows are UTC calendar days or months; each limit's ratio is used / limit.
 */

/** The used ratio from which BudgetNearlySpent fires (and the warning alert). */
export const NEARLY_SPENT_RATIO = 0.8;

export type BudgetLimit = 'spend' | 'traffic';

/** The UTC calendar day or month `now` falls in, as [from, to). */
export function budgetWindow(window: PoolBudget['window'], now: Date): { from: Date; to: Date } {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  if (window === 'month') return { from: new Date(Date.UTC(y, m, 1)), to: new Date(Date.UTC(y, m + 1, 1)) };
  const d = now.getUTCDate();
  return { from: new Date(Date.UTC(y, m, d)), to: new Date(Date.UTC(y, m, d + 1)) };
}

/** What a pass found of the budget, and what it makes happen. */
export interface BudgetJudgement {
  status: BudgetStatus;
  /** A limit at 100 % or more: the pool grows no more within the window. */
  exhausted: boolean;
  /** The limit with the highest ratio (undefined without usage data). */
  worst?: { limit: BudgetLimit; ratio: number };
  /** The events due now: each at most once per window. */
  emit: ('nearly-spent' | 'exhausted')[];
}

/**
 * Judges `usage` (undefined: none could be read) against `budget` in the window of `now`, given what
 * the previous pass wrote (`previous`, for the once-per-window events).
 */
export function judgeBudget(budget: PoolBudget, usage: PoolUsage | undefined, now: Date, previous: BudgetStatus | undefined): BudgetJudgement {
  const { from, to } = budgetWindow(budget.window, now);
  const base = { window: budget.window, from: from.toISOString(), to: to.toISOString() };
  const inWindow = (marker: string | undefined): string | undefined => (marker === base.from ? marker : undefined);
  const kept = {
    ...(inWindow(previous?.nearlySpentIn) ? { nearlySpentIn: base.from } : {}),
    ...(inWindow(previous?.exhaustedIn) ? { exhaustedIn: base.from } : {}),
  };
  if (usage === undefined) return { status: { ...base, noUsageData: true, ...kept }, exhausted: false, emit: [] };
  const uses: Partial<Record<BudgetLimit, { used: number; limit: number; ratio: number }>> = {};
  if (budget.spend !== undefined) uses.spend = use(usage.cost, budget.spend);
  const trafficLimit = budget.traffic === undefined ? undefined : parseTrafficQuantity(budget.traffic);
  if (trafficLimit !== undefined) uses.traffic = use(usage.bytes, trafficLimit);
  let worst: { limit: BudgetLimit; ratio: number } | undefined;
  for (const limit of ['spend', 'traffic'] as const) {
    const u = uses[limit];
    if (u && (worst === undefined || u.ratio > worst.ratio)) worst = { limit, ratio: u.ratio };
  }
  const ratio = worst?.ratio ?? 0;
  const exhausted = ratio >= 1;
  const emit: BudgetJudgement['emit'] = [];
  const status: BudgetStatus = { ...base, ...uses, ...kept };
  if (ratio >= NEARLY_SPENT_RATIO && status.nearlySpentIn === undefined) {
    status.nearlySpentIn = base.from;
    // Straight past 100 %: the exhausted event says more; nearly spent is not told apart.
    if (!exhausted) emit.push('nearly-spent');
  }
  if (exhausted && status.exhaustedIn === undefined) {
    status.exhaustedIn = base.from;
    emit.push('exhausted');
  }
  return { status, exhausted, ...(worst ? { worst } : {}), emit };
}

function use(used: number, limit: number): { used: number; limit: number; ratio: number } {
  return { used, limit, ratio: Math.round((used / limit) * 10_000) / 10_000 };
}

/** `412.5 GB`, `3.2 TB`: bytes in decimal units for words. */
export function bytesWords(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let v = bytes;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i] ?? 'B'}`;
}

/** `traffic 412.5 GB of 500.0 GB (82 %)` for each limit, the day or month and when it turns. */
export function budgetWords(status: BudgetStatus): string {
  if (status.noUsageData) return `no usage data for this ${status.window}: the budget blocks nothing`;
  const parts: string[] = [];
  if (status.spend) parts.push(`spend ${status.spend.used.toFixed(2)} of ${status.spend.limit} (${Math.floor(status.spend.ratio * 100)} %)`);
  if (status.traffic)
    parts.push(`traffic ${bytesWords(status.traffic.used)} of ${bytesWords(status.traffic.limit)} (${Math.floor(status.traffic.ratio * 100)} %)`);
  return `${parts.join(', ')} this ${status.window} (the window turns at ${status.to})`;
}

/** The `Budget` condition: True within the budget, False once a limit is spent, Unknown without usage data. */
export function budgetCondition(status: BudgetStatus): Pick<ProxyCondition, 'status' | 'reason' | 'message'> {
  const message = budgetWords(status);
  if (status.noUsageData) return { status: 'Unknown', reason: 'NoUsageData', message };
  const ratio = Math.max(status.spend?.ratio ?? 0, status.traffic?.ratio ?? 0);
  if (ratio >= 1) return { status: 'False', reason: 'Exhausted', message };
  return { status: 'True', reason: ratio >= NEARLY_SPENT_RATIO ? 'NearlySpent' : 'WithinBudget', message };
}
