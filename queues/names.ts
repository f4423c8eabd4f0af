/** Queue names. Every key lives under one hash-tagged prefix (default `{egress}`), so Redis Cluster works. */
export const QUEUES = {
  checks: 'checks',
  results: 'results',
  reconcile: 'reconcile',
  gc: 'gc',
} as const;

export type QueueName = (typeof QUEUES)[keyof typeof QUEUES];
export const ALL_QUEUES: readonly QueueName[] = Object.values(QUEUES);

export const DEFAULT_PREFIX = '{egress}';

/** Job scheduler id for a provider's periodic check. */
export function checkSchedulerId(provider: string): string {
  return `check-${provider}`;
}

/** The provider a check scheduler id belongs to, or undefined for other schedulers. */
export function providerOfCheckScheduler(id: string): string | undefined {
  return id.startsWith('check-') ? id.slice('check-'.length) : undefined;
}

/** Job scheduler id for a provider's garbage-collection sweep. */
export function gcSchedulerId(provider: string): string {
  return `gc-${provider}`;
}

/** BullMQ custom job ids must not contain `:` nor be all digits. */
export function safeJobId(...parts: string[]): string {
  return parts.join('-').replaceAll(':', '_');
}
