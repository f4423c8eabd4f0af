import { z } from 'zod';
import { REASONS } from '../src/health/reasons.ts';
import { EgressError } from '../src/errors.ts';

/** A request to check one provider. */
export const checkJobSchema = z.strictObject({
  provider: z.string().min(1),
  trigger: z.enum(['schedule', 'startup', 'adhoc']),
});
export type CheckJobData = z.infer<typeof checkJobSchema>;

/** Reconcile one proxy: the job carries only its name (level-triggered). */
export const reconcileJobSchema = z.strictObject({ proxy: z.string().min(1) });
export type ReconcileJobData = z.infer<typeof reconcileJobSchema>;

/** Sweep one provider's instances for orphans. */
export const gcJobSchema = z.strictObject({ provider: z.string().min(1) });
export type GcJobData = z.infer<typeof gcJobSchema>;

export const targetResultSchema = z.strictObject({
  target: z.string().min(1),
  ready: z.boolean(),
  reason: z.enum(REASONS),
  message: z.string(),
  details: z.record(z.string(), z.string()),
  durationSeconds: z.number().nonnegative(),
});

/** What a check produced; the publisher turns it into ProviderHealth status and metrics. */
export const checkResultSchema = z.strictObject({
  provider: z.string().min(1),
  /** The check job that produced it: redelivery of the same result is recognised by it. */
  checkJobId: z.string().min(1),
  /** ISO time the check started. */
  checkedAt: z.iso.datetime(),
  targets: z.array(targetResultSchema),
});
export type CheckResultData = z.infer<typeof checkResultSchema>;

/**
 * A job on `results`: the results that check workers finished together, in the order they
 * finished (job name `results`). One result alone (job name `result`, what earlier releases
 * put on the queue) is still accepted.
 */
export const resultsJobSchema = z.union([
  z.strictObject({ results: z.array(checkResultSchema).min(1) }),
  checkResultSchema.transform((result) => ({ results: [result] })),
]);
export type ResultsJobData = z.input<typeof resultsJobSchema>;

export class JobDataError extends EgressError {
  constructor(queue: string, message: string, cause: unknown) {
    super('ERR_JOB_DATA', `invalid ${queue} job data: ${message}`, { cause });
  }
}

/** Validates job data on either end of a queue; a bad payload is never retried. */
export function parseJobData<T>(schema: z.ZodType<T>, queue: string, data: unknown): T {
  const result = schema.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new JobDataError(queue, `${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`, result.error);
  }
  return result.data;
}
