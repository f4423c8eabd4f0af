import { addressKey, effectiveAddress, inRange, parseAddress, parseRange, type Address, type Range } from './addresses.ts';
import { DEFAULT_DENIED_RANGES, type DenyReason } from './default-ranges.ts';
import type { ProxyEgressPolicy } from './policy-config.ts';

/**
 * The egress policy engine: decides whether a proxy may connect to one address and port.
 *
 * Order: the echo exception (a plain-HTTP `GET` of exactly the echo path on the echo listener),
 * then the guarded listeners (always refused), then `deny`, then `allow`, then the default deny
 * ranges (default-ranges.ts); anything else is allowed. Addresses are judged in the form a
 * connection effectively reaches (IPv4-mapped, NAT64, 6to4… by their IPv4 address).
 */

/** A plain-HTTP request's method and path with query (CONNECT has none). */
export interface EgressRequest {
  method: string;
  path: string;
}

export type EgressDecision = { allowed: true; reason: 'allowed' | 'allowed-range' | 'echo' } | { allowed: false; reason: DenyReason };

/** What the policy needs to know about the machine it runs on; the proxy program keeps it fresh. */
export interface PolicyContext {
  /** This machine's interface addresses (os.networkInterfaces()); loopback is always local. */
  localAddresses: readonly string[];
  /** Guarded and echo host names resolved to addresses; a name missing here is not resolved (yet). */
  resolved: ReadonlyMap<string, readonly string[]>;
}

export interface EgressPolicy {
  judge(address: string, port: number, request?: EgressRequest): EgressDecision;
  /** The host names (not IP literals) among the guarded and echo listeners, for the caller to resolve. */
  readonly hostNames: readonly string[];
}

/** Which addresses a listener's host covers: this machine's (any local address), some addresses, or — unresolved — all. */
interface Scope {
  any: boolean;
  local: boolean;
  addresses: ReadonlySet<string>;
}

const THIS_HOST: readonly Range[] = ['127.0.0.0/8', '0.0.0.0/8', '::1/128', '::/128'].map(parseRange);

/** The default policy of a proxy that has no readable document: the default deny, nothing guarded by name, no echo. */
export const NO_POLICY: ProxyEgressPolicy = { version: 1, allow: [], deny: [], guarded: [] };

export function compileEgressPolicy(doc: ProxyEgressPolicy, context: PolicyContext): EgressPolicy {
  const allow = doc.allow.map(parseRange);
  const deny = doc.deny.map(parseRange);
  const local = new Set<string>();
  for (const text of context.localAddresses) {
    const a = parseAddress(text);
    if (a) local.add(addressKey(effectiveAddress(a)));
  }
  const isLocal = (a: Address): boolean => THIS_HOST.some((r) => inRange(a, r)) || local.has(addressKey(a));

  const hostNames: string[] = [];
  function scopeOf(host: string): Scope {
    const literal = parseAddress(host);
    const texts = literal ? [host] : context.resolved.get(host);
    if (!literal && !hostNames.includes(host)) hostNames.push(host);
    if (!texts || texts.length === 0) return { any: true, local: false, addresses: new Set() };
    const addresses = new Set<string>();
    let isLocalHost = false;
    for (const text of texts) {
      const a = parseAddress(text);
      if (!a) continue;
      const eff = effectiveAddress(a);
      addresses.add(addressKey(eff));
      if (isLocal(eff)) isLocalHost = true;
    }
    return { any: false, local: isLocalHost, addresses };
  }
  const covers = (scope: Scope, a: Address): boolean => scope.any || (scope.local && isLocal(a)) || scope.addresses.has(addressKey(a));

  const guards = doc.guarded.map((g) => ({ port: g.port, scope: scopeOf(g.host) }));
  const echo = doc.echo ? { port: doc.echo.port, path: doc.echo.path, scope: scopeOf(doc.echo.host) } : undefined;

  return {
    hostNames,
    judge(text, port, request) {
      const parsed = parseAddress(text);
      if (!parsed) return { allowed: false, reason: 'unresolvable' };
      const a = effectiveAddress(parsed);
      if (echo && request && port === echo.port && !echo.scope.any && covers(echo.scope, a) && request.method === 'GET' && request.path === echo.path) {
        return { allowed: true, reason: 'echo' };
      }
      if (guards.some((g) => g.port === port && covers(g.scope, a))) return { allowed: false, reason: 'guarded-listener' };
      if (deny.some((r) => inRange(a, r) || inRange(parsed, r))) return { allowed: false, reason: 'denied-range' };
      if (allow.some((r) => inRange(a, r))) return { allowed: true, reason: 'allowed-range' };
      const hit = DEFAULT_DENIED_RANGES.find(({ range }) => inRange(a, range));
      if (hit) return { allowed: false, reason: hit.reason };
      return { allowed: true, reason: 'allowed' };
    },
  };
}
