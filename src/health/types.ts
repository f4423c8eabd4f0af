import type { TargetResult } from './check-result.ts';

/** What a checker reports for one target: one definition, with the job payload that carries it. */
export type { TargetResult } from './check-result.ts';

/**
 * A provider's health check. It must return once `signal` has ended, and once it has,
 * every target it reports is `Timeout`, whatever the underlying error said.
 */
export interface HealthCheck {
  check(signal: AbortSignal): Promise<TargetResult[]>;
}
