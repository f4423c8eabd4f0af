import type { Reason } from './reasons.ts';

export interface TargetStatus {
  name: string;
  ready: boolean;
  reason: Reason;
  message: string;
  /** ISO time; changes only when this target's `ready` flips. */
  lastTransitionTime: string;
  lastCheckTime: string;
  durationSeconds: number;
  details: Record<string, string>;
}

export interface ProviderHealthStatus {
  ready: boolean;
  /** ISO time; changes only when the overall `ready` flips. */
  lastTransitionTime: string;
  lastCheckTime: string;
  /** A list keyed by `name`. */
  targets: TargetStatus[];
}

/** One per configured provider, as `egress get providerhealth` and the API show it. */
export interface ProviderHealth {
  name: string;
  status: ProviderHealthStatus;
}
