/**
 * The upstream proxy a forward proxy chains through (a vendor's proxy, issue 24): what the proxy
 * connects to instead of the destination, and how it asks that proxy to go on. The hop is the
 * operator's configuration, not a client's request: the egress policy judges what the client asked
 * for, never the hop's address.
 */

export type ChainScheme = 'http' | 'https' | 'socks5';

export interface ChainHop {
  scheme: ChainScheme;
  /** A name or an IP address (IPv6 without brackets). */
  host: string;
  port: number;
  /** Basic Proxy-Authorization (http, https) or RFC 1929 username/password (socks5); none when both are absent. */
  username?: string;
  password?: string;
  /** https: the server name checked against the hop's certificate (default: `host`). */
  servername?: string;
  /** https: extra PEM certificate authorities for the hop (a private vendor CA, a test CA). */
  ca?: string;
}

/** Parses a `ChainHop` from untrusted JSON (the proxy host's control request); undefined when it is not one. */
export function asChainHop(value: unknown): ChainHop | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (v.scheme !== 'http' && v.scheme !== 'https' && v.scheme !== 'socks5') return undefined;
  if (typeof v.host !== 'string' || v.host === '' || typeof v.port !== 'number' || !Number.isInteger(v.port) || v.port < 1 || v.port > 65535) return undefined;
  const hop: ChainHop = { scheme: v.scheme, host: v.host, port: v.port };
  if (typeof v.username === 'string') hop.username = v.username;
  if (typeof v.password === 'string') hop.password = v.password;
  if (typeof v.servername === 'string') hop.servername = v.servername;
  if (typeof v.ca === 'string') hop.ca = v.ca;
  return hop;
}

/** Whether two hops are the same route with the same credentials. */
export function sameHop(a: ChainHop | undefined, b: ChainHop | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.scheme === b.scheme &&
    a.host === b.host &&
    a.port === b.port &&
    a.username === b.username &&
    a.password === b.password &&
    a.servername === b.servername &&
    a.ca === b.ca
  );
}

/** The Basic Proxy-Authorization value for an http(s) hop, or undefined when it takes none. */
export function hopAuthorization(hop: ChainHop): string | undefined {
  if (hop.username === undefined && hop.password === undefined) return undefined;
  return `Basic ${Buffer.from(`${hop.username ?? ''}:${hop.password ?? ''}`).toString('base64')}`;
}
