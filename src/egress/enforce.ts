import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { EgressError } from '../errors.ts';
import { parseAddress } from './addresses.ts';
import type { DenyReason } from './default-ranges.ts';
import type { EgressPolicy, EgressRequest } from './policy.ts';

/** The policy refused a destination; nothing was connected. `reason` is the stable string of default-ranges.ts. */
export class EgressDeniedError extends EgressError {
  readonly reason: DenyReason;
  constructor(reason: DenyReason, target: string) {
    super('ERR_EGRESS_DENIED', `egress to ${target} denied: ${reason}`, { retryable: false });
    this.reason = reason;
  }
}

/** Resolves a host name to every address (getaddrinfo, as node's own connect would). */
export type Resolver = (hostname: string, signal: AbortSignal) => Promise<LookupAddress[]>;

export interface EgressTarget {
  /** As the client wrote it: a name, an IP literal, `[v6]`, or a spelling only getaddrinfo understands (`0x7f.1`). */
  hostname: string;
  port: number;
  /** Plain HTTP only: the method and path with query (the echo exception needs them). */
  request?: EgressRequest;
}

/**
 * A `lookup` for net/http that answers only with `addresses` (already judged), whatever host it is
 * asked about: the connection goes where the policy looked, with no second resolution in between.
 */
export function pinnedLookup(addresses: readonly LookupAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
    const list = family === 0 ? [...addresses] : addresses.filter((a) => a.family === family);
    const first = list[0];
    if (!first) {
      callback(Object.assign(new Error(`no allowed IPv${family} address`), { code: 'ENOTFOUND' }), '', 0);
      return;
    }
    if (options.all) (callback as unknown as (err: null, all: LookupAddress[]) => void)(null, list);
    else callback(null, first.address, first.family);
  };
}

/**
 * Judges a destination before anything connects to it. An IP literal is judged as is (node does
 * not resolve it); any other host is resolved once, each address judged, and the connection pinned
 * to those addresses (returned as a lookup). Throws EgressDeniedError when any address is denied
 * (the reason of the first denied one), or when the name resolves to none. `signal` bounds the
 * resolution; given as a function it is made only when a name has to be resolved (an IP literal,
 * the common case on a proxy's hot path, costs no timer).
 */
export async function checkEgress(
  policy: () => EgressPolicy,
  target: EgressTarget,
  resolve: Resolver,
  signal: AbortSignal | (() => AbortSignal),
): Promise<LookupFunction | undefined> {
  const shown = `${target.hostname}:${target.port}`;
  if (parseAddress(target.hostname)) {
    const decision = policy().judge(target.hostname, target.port, target.request);
    if (!decision.allowed) throw new EgressDeniedError(decision.reason, shown);
    return undefined;
  }
  let addresses: LookupAddress[];
  try {
    addresses = await resolve(target.hostname, typeof signal === 'function' ? signal() : signal);
  } catch {
    throw new EgressDeniedError('unresolvable', shown);
  }
  if (addresses.length === 0) throw new EgressDeniedError('unresolvable', shown);
  const judge = policy();
  // A name is refused as soon as one of its addresses is: a name that mixes an allowed address
  // with a denied one is not a destination to pick the good half of (it is how rebinding and
  // split-horizon tricks point at the inside).
  for (const a of addresses) {
    const decision = judge.judge(a.address, target.port, target.request);
    if (!decision.allowed) throw new EgressDeniedError(decision.reason, shown);
  }
  return pinnedLookup(addresses);
}
