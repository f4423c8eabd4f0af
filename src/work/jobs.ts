import { z } from 'zod';
import { define } from '../../queues/jobs.ts';
import { QUEUES } from '../../queues/names.ts';
import { checkResultSchema } from '../health/check-result.ts';

/*
 * The work the domain asks for, declared once: each kind of job's queue, name, payload, attempts,
 * retention and deadline. queues/ defines what a declaration is and moves jobs (enqueue, consume,
 * retry); the work-requests port (work-requests.ts) is how the domain asks for them.
 */

/** A request to check one provider. */
export const checkJobSchema = z.strictObject({
  provider: z.string().min(1),
  trigger: z.enum(['schedule', 'startup', 'adhoc']),
});
export type CheckJobData = z.infer<typeof checkJobSchema>;

/** Reconcile one proxy: the job carries only its name (level-triggered). */
export const reconcileJobSchema = z.strictObject({ proxy: z.string().min(1) });
export type ReconcileJobData = z.infer<typeof reconcileJobSchema>;

/** Reconcile one ProxyPool (its members): the job carries only its name. */
export const poolReconcileJobSchema = z.strictObject({ pool: z.string().min(1) });
export type PoolReconcileJobData = z.infer<typeof poolReconcileJobSchema>;

/** Sweep one provider's instances for orphans. */
export const gcJobSchema = z.strictObject({ provider: z.string().min(1) });
export type GcJobData = z.infer<typeof gcJobSchema>;

/** The check results that check workers finished together, in the order they finished. */
export const resultsJobSchema = z.strictObject({ results: z.array(checkResultSchema).min(1) });
export type ResultsJobData = z.infer<typeof resultsJobSchema>;

/** Deadline of one reconcile or GC sweep: long enough for a provider's create call and its operation. */
const PROVIDER_WORK_MS = 5 * 60_000;
/**
 * How long into a GC sweep deletes may still start: a minute short of its deadline, for the deletes
 * in flight (a gcp delete waits for its operation) to finish, so that a sweep with more orphans than
 * its pace allows ends on its own and leaves the rest to the next.
 */
export const GC_DELETE_BUDGET_MS = PROVIDER_WORK_MS - 60_000;

export const JOBS = {
  /** Check one provider; the deadline is `--provider-check-timeout` (resolved), from when the check starts. */
  check: define({ queue: QUEUES.checks, name: 'check', schema: checkJobSchema, attempts: 5, deadlineMs: (s) => s.checks.timeoutMs }),
  /** Reconcile one proxy. */
  reconcile: define({ queue: QUEUES.reconcile, name: 'reconcile', schema: reconcileJobSchema, attempts: 5, deadlineMs: () => PROVIDER_WORK_MS }),
  /** Reconcile one pool: create, replace and delete its member Proxies (they are reconciled by their own jobs). */
  poolReconcile: define({ queue: QUEUES.reconcile, name: 'pool-reconcile', schema: poolReconcileJobSchema, attempts: 5, deadlineMs: () => PROVIDER_WORK_MS }),
  /**
   * A delayed look at one pool (a member reaching maxAge, a Failed member due for replacement): it only
   * asks for the pool's deduplicated reconcile when it comes due. A separate job, never the
   * deduplicated reconcile itself delayed: a delayed job holding the deduplication id would swallow
   * every immediate request until it came due.
   */
  poolLook: define({ queue: QUEUES.reconcile, name: 'pool-look', schema: poolReconcileJobSchema, attempts: 3, retention: { completed: 100, failed: 100 } }),
  /** The periodic resync: asks for a reconcile of every proxy. Its next run is the retry. */
  resync: define({ queue: QUEUES.reconcile, name: 'resync', schema: z.strictObject({}), attempts: 1, retention: { completed: 10, failed: 100 } }),
  /** One garbage-collection sweep of a provider. Its next sweep is the retry. */
  gc: define({ queue: QUEUES.gc, name: 'gc', schema: gcJobSchema, attempts: 1, deadlineMs: () => PROVIDER_WORK_MS }),
  /** Results of checks finished together, for the publisher. */
  results: define({ queue: QUEUES.results, name: 'results', schema: resultsJobSchema, attempts: 5 }),
  /** One result alone: what a batch of one is, and what earlier releases put on the queue. */
  result: define({ queue: QUEUES.results, name: 'result', schema: checkResultSchema, attempts: 5 }),
} as const;
