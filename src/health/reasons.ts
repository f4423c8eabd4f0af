/**
 * The reasons a ProviderHealth target can report. Stable strings: users alert on them.
 * Each one is documented in docs/health-checks.md (a test keeps the two in step). They travel in
 * the `results` job's payload (check-result.ts).
 */
export const REASONS = [
  'Ok',
  'Timeout',
  'Unreachable',
  'Forbidden',
  'Unauthorized',
  'SSHMaterialUnavailable',
  'SSHHandshakeFailed',
  'LibvirtConnectFailed',
  'PoolNotFound',
  'PoolInactive',
  'DaemonError',
  'Error',
] as const;

export type Reason = (typeof REASONS)[number];

export function isReason(value: string): value is Reason {
  return (REASONS as readonly string[]).includes(value);
}
