import type { Proxy } from '../model/proxy-resource.ts';
import type { NewEvent } from './event-sink.ts';

/**
 * The events of ban feedback, about the member Proxy: a block that started (repeated reports of
 * the same block record nothing, so a crawler cannot flood the stream) and a replacement asked of
 * the pool. Built from names, domains and counts only.
 */
export function memberBlocked(
  proxy: Pick<Proxy, 'name' | 'spec'>,
  pool: string | undefined,
  outcome: 'blocked' | 'captcha',
  domain: string,
  by: string,
  blockedUntil: string | undefined,
): NewEvent {
  const where = pool === undefined ? 'outside any pool: nothing is excluded or replaced' : `not picked for ${domain} until ${blockedUntil ?? '?'}`;
  return {
    type: 'Warning',
    reason: 'Blocked',
    object: { kind: 'Proxy', name: proxy.name },
    provider: proxy.spec.provider,
    message: `${outcome} on ${domain}, reported by ${by}; ${where}`,
    details: { outcome, domain, by, ...(pool === undefined ? {} : { pool }), ...(blockedUntil ? { blockedUntil } : {}) },
  };
}

export function replacementRequested(proxy: Pick<Proxy, 'name' | 'spec'>, pool: string, reason: string, by: string): NewEvent {
  return {
    type: 'Warning',
    reason: 'ReplacementRequested',
    object: { kind: 'Proxy', name: proxy.name },
    provider: proxy.spec.provider,
    message: `pool ${pool} asked to replace this member: ${reason} (last report by ${by})`,
    details: { pool, reason, by },
  };
}
