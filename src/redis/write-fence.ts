import { EgressError } from '../errors.ts';

/**
 * Write fences: a write that its caller has given up on must not be applied later. ioredis queues
 * commands while Redis is stalled (a SIGSTOPped or overloaded server keeps its socket open), so a
 * write whose HTTP request was answered 503 would otherwise run whenever Redis resumes. A fenced
 * write carries an absolute "not after" time (epoch ms) into its Lua script, which compares it with
 * Redis's own clock (`TIME`) and refuses to write once it has passed. The caller's clock and
 * Redis's must agree to within the margin the caller leaves before answering (NTP; see
 * docs/operations.md).
 */

const notAfterBySignal = new WeakMap<AbortSignal, number>();

/** Writes sent under `signal` are refused by Redis after `notAfterMs` (epoch ms); see writeNotAfter. */
export function fenceWrites(signal: AbortSignal, notAfterMs: number): void {
  notAfterBySignal.set(signal, Math.floor(notAfterMs));
}

/** The fence of writes sent under `signal`: epoch ms after which Redis refuses them, or 0 for none. */
export function writeNotAfter(signal: AbortSignal | undefined): number {
  return signal === undefined ? 0 : (notAfterBySignal.get(signal) ?? 0);
}

/** Redis ran a fenced write after its "not after" time and refused it: nothing was written. */
export class WriteTooLateError extends EgressError {
  constructor(what: string) {
    super('ERR_STORE_UNAVAILABLE', `${what} reached Redis after its deadline and was not applied: Redis is unreachable or overloaded; try again`, {
      retryable: true,
    });
  }
}

/** The error reply a fenced script answers with (ioredis rejects with it). */
export const TOO_LATE_REPLY = 'EGRESS_WRITE_TOO_LATE';

/**
 * Lua, first in a fenced script: refuses with TOO_LATE_REPLY when ARGV[index] is a time (epoch
 * ms, '0' for none) that Redis's clock has passed, before the script writes anything.
 */
export function luaFence(index: string): string {
  return `do
  local fence = tonumber(${index})
  if fence and fence > 0 then
    local t = redis.call('TIME')
    if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > fence then return redis.error_reply('${TOO_LATE_REPLY}') end
  end
end
`;
}

/** True for the reply of a fenced script that refused a late write (Redis may put `ERR ` before it). */
export function isTooLateReply(err: unknown): boolean {
  return err instanceof Error && /^(ERR )?EGRESS_WRITE_TOO_LATE\b/.test(err.message);
}
