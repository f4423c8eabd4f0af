import { timingSafeEqual, createHash } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Compares in constant time (over fixed-length digests, so the length leaks nothing either). */
function matchIndex(presented: string, tokens: readonly Buffer[]): number {
  const d = digest(presented);
  let found = -1;
  tokens.forEach((t, i) => {
    if (timingSafeEqual(d, t) && found < 0) found = i;
  });
  return found;
}

/**
 * Who made each authenticated request: the name of its token. Keyed by the request's context
 * (one per request, the same in every middleware and route; the raw Request is not: the body
 * limit replaces it), so nothing else holds it and it goes with the request.
 */
const callers = new WeakMap<Context, string>();

/**
 * The caller of a request, as events record it: its token's name (`name:token` in the token
 * file), `#N` for the N-th token when it has none, or `anonymous` when the API has no tokens.
 * Never the token.
 */
export function callerName(c: Context): string {
  return callers.get(c) ?? 'anonymous';
}

/** `Bearer`, spaces, then one word of visible characters, and nothing after it. */
const BEARER = /^Bearer +([\x21-\x7e]+)$/i;
const BASIC = /^Basic +([A-Za-z0-9+/]+=*)$/i;

/**
 * The token a request presents: `Bearer <token>` exactly (no trailing words), or, only where a
 * browser needs it (`basicAllowed`: Bull Board under /admin/), Basic with the token as password.
 */
function presentedToken(header: string | undefined, basicAllowed: boolean): string | undefined {
  if (!header) return undefined;
  const bearer = BEARER.exec(header);
  if (bearer) return bearer[1];
  const basic = basicAllowed ? BASIC.exec(header) : null;
  if (basic?.[1]) {
    const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return colon >= 0 ? decoded.slice(colon + 1) : undefined;
  }
  return undefined;
}

/**
 * The name of the token `presented` is (`name:token` in the token file, else `#N`), or undefined
 * when it is none of `tokens`; compared in constant time.
 */
export function tokenMatcher(tokens: readonly string[], names: readonly string[] = []): (presented: string) => string | undefined {
  const digests = tokens.map(digest);
  return (presented) => {
    const index = matchIndex(presented, digests);
    return index < 0 ? undefined : (names[index] ?? `#${index + 1}`);
  };
}

/** Requests authenticated some other way than a bearer token (the console's session cookie). */
export interface OtherAuthentication {
  /** Paths whose routes authenticate each request themselves (the console's pages and its session). */
  selfAuthenticated(path: string): boolean;
  /** The caller of a request already authenticated in this process (one the console dispatches), else undefined. */
  callerOf(c: Context): string | undefined;
}

/**
 * Requires a bearer token on every route but `/healthz` and `/v1/echo` when tokens are configured
 * (Basic with the token as password is accepted under `/admin/` only, for Bull Board in a browser).
 * With no tokens (allowed only on a loopback bind) everything is open; the Host check guards it.
 * `other`: the paths and requests that authenticate otherwise (src/console).
 */
export function requireToken(tokens: readonly string[], names: readonly string[] = [], other?: OtherAuthentication): MiddlewareHandler {
  const digests = tokens.map(digest);
  return async (c, next) => {
    const preauthenticated = other?.callerOf(c);
    if (preauthenticated !== undefined) {
      callers.set(c, preauthenticated);
      return next();
    }
    // /healthz and the readiness echo (it tells a caller only its own address) stay open.
    if (digests.length === 0 || c.req.path === '/healthz' || c.req.path === '/v1/echo') return next();
    if (other?.selfAuthenticated(c.req.path)) return next();
    const admin = c.req.path.startsWith('/admin/');
    const header = c.req.header('authorization');
    const token = presentedToken(header, admin);
    const index = token === undefined ? -1 : matchIndex(token, digests);
    if (index >= 0) {
      callers.set(c, names[index] ?? `#${index + 1}`);
      return next();
    }
    if (admin) c.header('WWW-Authenticate', 'Basic realm="egress", charset="UTF-8"');
    else c.header('WWW-Authenticate', 'Bearer realm="egress"');
    const message = token !== undefined ? 'the token is not valid' : header ? 'the Authorization header is not "Bearer <token>"' : 'a bearer token is required';
    return c.json({ error: 'Unauthorized', message }, 401);
  };
}
