import type { AutoscaleStatus, BudgetStatus, Pool, PoolStatus } from '../model/pool-resource.ts';
import type { ProxyCondition } from '../model/proxy-resource.ts';
import { budgetCondition } from './budget.ts';
import { desiredReplicas } from './pool-members.ts';

/*
 * The status a pool reconcile reports, built from what the pass found (pure: write-pool-status.ts
 * writes it). The pool's Ready condition is made here and nowhere else.
 */

/** The member counts a pass found. */
export type PoolCounts = Pick<PoolStatus, 'current' | 'ready' | 'rotating' | 'failed'>;

/**
 * What a pass reports on its pool: its member counts (with the count it wants, and what it found of
 * the budget and the autoscaler), or why its spec makes no members.
 */
export type PoolStatusReport = { counts: PoolCounts; desired?: number; budget?: BudgetStatus; autoscale?: AutoscaleStatus } | { invalid: string };

/** The Ready condition's value and words, before its transition time is settled. */
type Readiness = Pick<ProxyCondition, 'status' | 'reason' | 'message'>;

/**
 * The status `current` (the pool as stored when it is written) takes from `report` at `now`.
 * Counts: `desired` is 0 while the pool is being deleted, `lastError` goes. Invalid: the counts
 * stay as they were, `lastError` says why no members are made.
 */
export function nextPoolStatus(current: Pool, report: PoolStatusReport, now: Date): PoolStatus {
  if ('invalid' in report) {
    const ready = readyCondition(current.status, { status: 'False', reason: 'InvalidSpec', message: report.invalid }, now);
    return {
      ...current.status,
      desired: desiredReplicas(current),
      lastError: report.invalid,
      conditions: withCondition(current.status, ready),
      observedGeneration: current.metadata.generation,
    };
  }
  const { counts } = report;
  const terminating = current.metadata.deletionRequestedAt !== undefined;
  const desired = terminating ? 0 : (report.desired ?? desiredReplicas(current));
  const ready = readyCondition(current.status, countsReadiness(counts, desired, terminating), now);
  const { lastError: _drop, budget: _budget, autoscale: _autoscale, ...rest } = current.status;
  let conditions = withCondition(current.status, ready);
  if (report.budget) conditions = withCondition({ conditions }, condition(current.status, 'Budget', budgetCondition(report.budget), now), 1);
  else conditions = conditions.filter((c) => c.type !== 'Budget');
  return {
    ...rest,
    desired,
    ...counts,
    conditions,
    observedGeneration: current.metadata.generation,
    ...(report.budget ? { budget: report.budget } : {}),
    ...(report.autoscale ? { autoscale: report.autoscale } : {}),
  };
}

/** True when `next` says nothing `stored` does not (the write is skipped). */
export function sameStatus(next: PoolStatus, stored: PoolStatus): boolean {
  return JSON.stringify(next) === JSON.stringify(stored);
}

/** Ready when enough members are (never while being deleted); else the most telling reason why not. */
function countsReadiness(counts: PoolCounts, desired: number, terminating: boolean): Readiness {
  const isReady = !terminating && counts.ready >= desired;
  const reason = terminating ? 'Terminating' : isReady ? 'EnoughReady' : counts.rotating > 0 ? 'Rotating' : counts.failed > 0 ? 'MembersFailed' : 'Scaling';
  return { status: isReady ? 'True' : 'False', reason, message: `${counts.ready} of ${desired} members ready` };
}

/** The Ready condition: its transition time moves only when its value flips. */
function readyCondition(status: PoolStatus, readiness: Readiness, now: Date): ProxyCondition {
  return condition(status, 'Ready', readiness, now);
}

/** A condition of `type`: its transition time moves only when its value flips. */
function condition(status: Pick<PoolStatus, 'conditions'>, type: string, readiness: Readiness, now: Date): ProxyCondition {
  const previous = status.conditions.find((c) => c.type === type);
  return {
    type,
    ...readiness,
    lastTransitionTime: previous?.status === readiness.status ? previous.lastTransitionTime : now.toISOString(),
  };
}

/** The conditions with `condition` at `at` (first by default) in place of the one of its type. */
function withCondition(status: Pick<PoolStatus, 'conditions'>, condition: ProxyCondition, at = 0): ProxyCondition[] {
  const others = status.conditions.filter((c) => c.type !== condition.type);
  return [...others.slice(0, at), condition, ...others.slice(at)];
}
