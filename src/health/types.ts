import type { Reason } from './reasons.ts';

/** What a checker reports for one target of a provider (the apiserver, the compute API, a KVM host). */
export interface TargetResult {
  target: string;
  ready: boolean;
  reason: Reason;
  message: string;
  /** Where to look: addresses, versions, pool state. Never a secret. */
  details: Record<string, string>;
  durationSeconds: number;
}

/**
 * A provider's health check. It must return once `signal` has ended, and once it has,
 * every target it reports is `Timeout`, whatever the underlying error said.
 */
export interface HealthCheck {
  check(signal: AbortSignal): Promise<TargetResult[]>;
}
