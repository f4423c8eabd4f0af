/** A plain-HTTP request's absolute-form target (`GET http://host:port/path?q HTTP/1.1`). */
export interface AbsoluteTarget {
  /** As URL syntax spells it (`[::1]` for IPv6): what the policy judges. */
  hostname: string;
  /** What a socket connects to (IPv6 without brackets). */
  connectHost: string;
  port: number;
  /** The origin-form target sent upstream: path and query. */
  path: string;
  /** `host[:port]`, the Host header sent upstream (RFC 9112 §3.2.2: the target's, not the client's). */
  authority: string;
}

/** A CONNECT's authority-form target (`CONNECT host:port HTTP/1.1`). */
export interface AuthorityTarget {
  hostname: string;
  connectHost: string;
  port: number;
}

/** Why a target is refused with 400, said to the client. */
export class BadTarget extends Error {}

const unbracket = (hostname: string): string => (hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname);

/** Reads a plain request's target; throws BadTarget for anything but an absolute `http://` URI. */
export function absoluteTarget(url: string | undefined): AbsoluteTarget {
  let u: URL;
  try {
    u = new URL(url ?? '');
  } catch {
    throw new BadTarget(`this is a forward proxy: send an absolute http:// request target or CONNECT (got "${String(url).slice(0, 200)}")`);
  }
  if (u.protocol !== 'http:') throw new BadTarget(`only http:// request targets are forwarded; for ${u.protocol}// use CONNECT`);
  if (u.hostname === '') throw new BadTarget('the request target has no host');
  return {
    hostname: u.hostname,
    connectHost: unbracket(u.hostname),
    port: u.port === '' ? 80 : Number(u.port),
    path: `${u.pathname}${u.search}`,
    authority: u.host,
  };
}

/**
 * Reads a CONNECT's `host:port`; throws BadTarget without one. The host is kept as the client
 * spelled it (not normalised as an http:// URL would), so the policy sees every spelling.
 */
export function authorityTarget(authority: string | undefined): AuthorityTarget {
  let u: URL | undefined;
  try {
    u = new URL(`connect://${authority ?? ''}`);
  } catch {
    u = undefined;
  }
  if (!u || u.hostname === '' || u.port === '' || u.pathname !== '' || u.search !== '' || u.username !== '') {
    throw new BadTarget(`CONNECT needs host:port (got "${String(authority).slice(0, 200)}")`);
  }
  return { hostname: u.hostname, connectHost: unbracket(u.hostname), port: Number(u.port) };
}
