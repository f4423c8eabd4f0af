import { EgressError } from '../errors.ts';
import type { PoolBudget } from '../model/pool-resource.ts';
import type { BudgetLimit } from './budget.ts';

/*
 * The spent-budget key picks read (`<prefix>:pick:<pool>:budget`, pick-keys.ts): the pool reconcile
 * writes `<stop 0|1> <limit> <window>` while a limit of the pool's budget is spent, expiring when
 * the window turns, and deletes it otherwise; the pick script reads it in the pick's one round trip.
 */

/** A spent budget as a pick sees it: which limit, the window, and the seconds until it turns. */
export interface SpentBudget {
  limit: BudgetLimit;
  window: PoolBudget['window'];
  stopPicks: boolean;
  retryAfterSeconds: number;
}

/** The key's value the reconcile writes. */
export function spentBudgetValue(stopPicks: boolean, limit: BudgetLimit, window: PoolBudget['window']): string {
  return `${stopPicks ? 1 : 0} ${limit} ${window}`;
}

/** The key's value and time to live (ms) as the pick script returns them. */
export function spentBudget(value: string | undefined, ttlMs: number | undefined): SpentBudget {
  const [stop, limit, window] = (value ?? '').split(' ');
  return {
    limit: limit === 'spend' ? 'spend' : 'traffic',
    window: window === 'month' ? 'month' : 'day',
    stopPicks: stop === '1',
    // A key without an expiry (-1) or gone meanwhile (-2) says nothing of the window: a minute.
    retryAfterSeconds: ttlMs !== undefined && ttlMs > 0 ? Math.ceil(ttlMs / 1000) : 60,
  };
}

/** The pool's budget is spent and it says stopPicks: answered 429 with Retry-After until the window turns. */
export class BudgetExhaustedError extends EgressError {
  constructor(
    readonly pool: string,
    readonly budget: SpentBudget,
  ) {
    super(
      'ERR_POOL_BUDGET_EXHAUSTED',
      `pool "${pool}" has spent its ${budget.limit} budget for this ${budget.window} (spec.budget.stopPicks): no picks until the window turns in ${budget.retryAfterSeconds}s`,
      { retryable: true },
    );
  }
}
