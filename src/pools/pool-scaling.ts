import type { EventSink } from '../events/event-sink.ts';
import { budgetEvent, poolScaled } from '../events/pool-events.ts';
import type { AutoscaleStatus, BudgetStatus, Pool } from '../model/pool-resource.ts';
import type { PoolUsage, PoolUsageReader } from '../usage/usage-types.ts';
import { autoscaleLookMs, decideReplicas } from './autoscale.ts';
import { budgetWindow, budgetWords, judgeBudget } from './budget.ts';
import type { PickDemandStore } from './pick-demand.ts';
import { spentBudgetValue } from './pick-budget.ts';

/** A pool with a budget is looked at again this often: its usage grows between passes. */
export const BUDGET_LOOK_MS = 60_000;

export interface PoolScalingDeps {
  /** Usage of pools within a window; absent: budgets report "no usage data" and never block. */
  usage?: PoolUsageReader | undefined;
  /** The pick counter and the spent-budget key (Redis); absent: autoscaled pools hold their count. */
  demand?: PickDemandStore | undefined;
  events?: EventSink | undefined;
}

/** What the budget and the autoscaler make of one pass of the pool reconcile. */
export interface PoolScaling {
  /** The autoscaler's count (autoscaled pools only). */
  replicas?: number;
  /** The budget is spent: at most this many live members. */
  growthCap?: number;
  budget?: BudgetStatus;
  autoscale?: AutoscaleStatus;
  /** When to look again for the budget's or the autoscaler's sake. */
  lookAfterMs?: number;
}

/**
 * Reads the pool's usage (budget) and pick counter (autoscale), judges them (budget.ts,
 * autoscale.ts), records the events due, and keeps the spent-budget key picks read in step. `live`:
 * the members there are (not being deleted). Called for a valid pool that is not being deleted.
 */
export async function scalePool(pool: Pool, live: number, now: Date, deps: PoolScalingDeps, signal: AbortSignal): Promise<PoolScaling> {
  const out: PoolScaling = {};
  const look = (ms: number): void => {
    out.lookAfterMs = Math.max(0, Math.min(out.lookAfterMs ?? Number.POSITIVE_INFINITY, ms));
  };
  const budget = pool.spec.budget;
  let exhausted = false;
  if (budget) {
    const judged = judgeBudget(budget, await readUsage(pool, budget.window, now, deps, signal), now, pool.status.budget);
    out.budget = judged.status;
    exhausted = judged.exhausted;
    const words = budgetWords(judged.status);
    for (const e of judged.emit) if (judged.worst) deps.events?.record(budgetEvent(pool, judged.status, judged.worst.limit, e === 'exhausted', words));
    if (exhausted && judged.worst) {
      out.growthCap = live;
      await deps.demand?.markSpent(pool.name, spentBudgetValue(budget.stopPicks, judged.worst.limit, budget.window), Date.parse(judged.status.to), signal);
    } else await deps.demand?.clearSpent(pool.name, signal);
    look(Math.min(BUDGET_LOOK_MS, Date.parse(judged.status.to) - now.getTime()));
  } else if (pool.status.budget) {
    // The budget was taken off the spec: picks go on at once.
    await deps.demand?.clearSpent(pool.name, signal);
  }
  const autoscale = pool.spec.autoscale;
  if (autoscale && deps.demand) {
    const demand = await deps.demand.read(pool.name, signal);
    const decision = decideReplicas({
      spec: autoscale,
      startReplicas: pool.spec.replicas,
      previous: pool.status.autoscale,
      demand,
      ...(exhausted ? { capAt: live } : {}),
    });
    out.autoscale = decision.state;
    out.replicas = decision.state.desired;
    if (decision.scaled) deps.events?.record(poolScaled(pool, decision.scaled.from, decision.scaled.to, decision.scaled.why));
    look(autoscaleLookMs(autoscale));
  }
  return out;
}

/** The pool's usage in the window of `now`, or undefined when there is no reader or it failed (the budget then blocks nothing). */
async function readUsage(pool: Pool, window: 'day' | 'month', now: Date, deps: PoolScalingDeps, signal: AbortSignal): Promise<PoolUsage | undefined> {
  if (!deps.usage) return undefined;
  const { from, to } = budgetWindow(window, now);
  try {
    return await deps.usage.poolUsage(pool.name, from, to, signal);
  } catch (err) {
    // A usage store that cannot answer blocks nothing (the status says no usage data); a cancelled pass ends.
    if (signal.aborted) throw err;
    return undefined;
  }
}
