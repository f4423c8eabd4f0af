import { z } from 'zod';

/** Highest GC delete rate accepted, per provider or for `--gc-deletes-per-second`. */
export const MAX_GC_DELETES_PER_SECOND = 1000;

/**
 * A provider's garbage-collection settings (`gc:` in its block of the configuration file). Absent
 * fields take the command-line value (`--gc-deletes-per-second`).
 */
export const providerGcSchema = z.strictObject({
  /**
   * Instance deletions a GC sweep starts per second on this provider, at most: evenly spaced, so that a
   * sweep of a large leak stays inside the provider's API quota. Fractions allowed (0.5: one every 2 s).
   */
  deletesPerSecond: z.number().positive().max(MAX_GC_DELETES_PER_SECOND).optional(),
});

export type ProviderGcSettings = z.infer<typeof providerGcSchema>;
