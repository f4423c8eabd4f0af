import { z } from 'zod';
import { REASONS } from './reasons.ts';

/**
 * What a checker reports for one target of a provider (the apiserver, the compute API, a KVM
 * host). The one definition: checkers return it, check jobs carry it, the publisher reads it.
 */
export const targetResultSchema = z.strictObject({
  target: z.string().min(1),
  ready: z.boolean(),
  reason: z.enum(REASONS),
  message: z.string(),
  /** Where to look: addresses, versions, pool state. Never a secret. */
  details: z.record(z.string(), z.string()),
  durationSeconds: z.number().nonnegative(),
});
export type TargetResult = z.infer<typeof targetResultSchema>;

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
