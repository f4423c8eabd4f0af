import type { BudgetStatus, Pool } from '../model/pool-resource.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import type { ApplyOutcome } from '../store/proxy-store.ts';
import type { NewEvent } from './event-sink.ts';

/**
 * The events of a pool's life, built in one place like proxy-events.ts. A member's own life
 * (instance created, Ready…) is recorded on the member Proxy by its reconcile; these say why the
 * pool made or removed a member.
 */

/** Why the pool creates or deletes a member. */
export type MemberCause =
  /** `spec.replicas` (or the autoscaler) asks for more or fewer members. */
  | 'scale'
  /** The member reached `spec.maxAge`. */
  | 'rotation'
  /** Someone asked for it to be replaced (ban feedback, `egress rotate pool`). */
  | 'replacement'
  /** `spec.spread` or the template no longer wants a member where it is. */
  | 'spread'
  /** The member stayed Failed for `--replace-after`. */
  | 'failed'
  /** The pool is being deleted. */
  | 'pool-deleted';

const CAUSE_WORDS: Record<MemberCause, string> = {
  scale: 'scaling to the desired count',
  rotation: 'older than spec.maxAge',
  replacement: 'replacement requested',
  spread: 'not where spec.spread or the template wants it',
  failed: 'Failed for too long',
  'pool-deleted': 'the pool is being deleted',
};

function where(p: Pick<Proxy, 'spec'>): string {
  return p.spec.placement === undefined ? p.spec.provider : `${p.spec.provider}/${p.spec.placement}`;
}

function replicasWords(pool: Pool): string {
  const a = pool.spec.autoscale;
  return a ? `autoscaled ${a.minReplicas} to ${a.maxReplicas} replicas` : `${pool.spec.replicas ?? 0} replicas`;
}

/** An apply through the API created or changed the pool (`by`: the caller's token name). */
export function poolApplied(pool: Pool, outcome: Exclude<ApplyOutcome, 'unchanged'>, by: string): NewEvent {
  return {
    type: 'Normal',
    reason: 'Applied',
    object: { kind: 'ProxyPool', name: pool.name },
    message: `${outcome} by ${by} (generation ${pool.metadata.generation}, ${replicasWords(pool)})`,
    details: { outcome, by, generation: pool.metadata.generation, ...(pool.spec.replicas === undefined ? {} : { replicas: pool.spec.replicas }) },
  };
}

export function poolDeletionRequested(pool: Pool, by: string): NewEvent {
  return {
    type: 'Normal',
    reason: 'DeletionRequested',
    object: { kind: 'ProxyPool', name: pool.name },
    message: `deletion requested by ${by}; its members are deleted first`,
    details: { by },
  };
}

/** `why`: more about the cause (the replacement request's reason). */
export function memberCreated(pool: Pool, member: Pick<Proxy, 'name' | 'spec'>, cause: MemberCause, why?: string): NewEvent {
  return {
    type: 'Normal',
    reason: 'MemberCreated',
    object: { kind: 'ProxyPool', name: pool.name },
    provider: member.spec.provider,
    message: `member ${member.name} created on ${where(member)}: ${CAUSE_WORDS[cause]}${why ? ` (${why})` : ''}`,
    details: { member: member.name, cause },
  };
}

export function memberDeleted(pool: Pool, member: Pick<Proxy, 'name' | 'spec'>, cause: MemberCause, why?: string): NewEvent {
  return {
    type: cause === 'failed' ? 'Warning' : 'Normal',
    reason: 'MemberDeleted',
    object: { kind: 'ProxyPool', name: pool.name },
    provider: member.spec.provider,
    message: `member ${member.name} on ${where(member)} deleted: ${CAUSE_WORDS[cause]}${why ? ` (${why})` : ''}`,
    details: { member: member.name, cause },
  };
}

export function poolDeleted(pool: Pool): NewEvent {
  return { type: 'Normal', reason: 'Deleted', object: { kind: 'ProxyPool', name: pool.name }, message: 'members gone; the pool is removed' };
}

/** A limit of the pool's budget reached 80 % (`exhausted`: 100 %) within its window: once per window each. */
export function budgetEvent(pool: Pool, status: BudgetStatus, limit: 'spend' | 'traffic', exhausted: boolean, words: string): NewEvent {
  const use = status[limit];
  const stopPicks = pool.spec.budget?.stopPicks ?? false;
  const then = exhausted ? `: the pool grows no more${stopPicks ? ' and picks answer 429' : ''} until ${status.to}` : '';
  return {
    type: 'Warning',
    reason: exhausted ? 'BudgetExhausted' : 'BudgetNearlySpent',
    object: { kind: 'ProxyPool', name: pool.name },
    message: `${limit} budget ${exhausted ? 'spent' : 'nearly spent'}: ${words}${then}`,
    details: {
      limit,
      ratio: use?.ratio ?? 0,
      used: use?.used ?? 0,
      budgetLimit: use?.limit ?? 0,
      window: status.window,
      until: status.to,
      ...(exhausted ? { stopPicks } : {}),
    },
  };
}

/** The autoscaler moved the pool's count. */
export function poolScaled(pool: Pool, from: number, to: number, why: string): NewEvent {
  return {
    type: 'Normal',
    reason: to > from ? 'ScaledUp' : 'ScaledDown',
    object: { kind: 'ProxyPool', name: pool.name },
    message: `autoscaled from ${from} to ${to} members: ${why}`,
    details: { from, to, why },
  };
}
