/**
 * The reasons a ProviderHealth target can report, defined with the check result they travel in
 * (queues/check-result.ts) and re-exported here for the domain.
 */
export { REASONS, isReason, type Reason } from '../../queues/check-result.ts';
