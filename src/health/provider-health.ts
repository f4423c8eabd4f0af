import { z } from 'zod';
import { REASONS } from './reasons.ts';
import { MAX_MESSAGE } from './message.ts';

/**
 * ProviderHealth as the publisher writes it and every store keeps it. The zod schemas are the one
 * definition: the types below are inferred from them, and the Kubernetes CRD's OpenAPI schema is
 * generated from them (src/crds).
 */

export const targetStatusSchema = z.strictObject({
  name: z.string().min(1),
  ready: z.boolean(),
  reason: z.enum(REASONS),
  /** At most MAX_MESSAGE characters (the publisher truncates). */
  message: z.string().max(MAX_MESSAGE),
  /** ISO time; changes only when this target's `ready` flips. */
  lastTransitionTime: z.iso.datetime(),
  lastCheckTime: z.iso.datetime(),
  durationSeconds: z.number().nonnegative(),
  details: z.record(z.string(), z.string()),
});
export type TargetStatus = z.infer<typeof targetStatusSchema>;

export const providerHealthStatusSchema = z.strictObject({
  ready: z.boolean(),
  /** ISO time; changes only when the overall `ready` flips. */
  lastTransitionTime: z.iso.datetime(),
  lastCheckTime: z.iso.datetime(),
  /** A list keyed by `name`. */
  targets: z.array(targetStatusSchema).meta({ listMapKeys: ['name'] }),
});
export type ProviderHealthStatus = z.infer<typeof providerHealthStatusSchema>;

/** One per configured provider, as `egress get providerhealth` and the API show it. */
export const providerHealthSchema = z.strictObject({
  name: z.string().min(1),
  status: providerHealthStatusSchema,
});
export type ProviderHealth = z.infer<typeof providerHealthSchema>;
