import { timingSafeEqual, createHash } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Compares in constant time (over fixed-length digests, so the length leaks nothing either). */
function matchesAny(presented: string, tokens: readonly Buffer[]): boolean {
  const d = digest(presented);
  let ok = false;
  for (const t of tokens) ok = timingSafeEqual(d, t) || ok;
  return ok;
}

function presentedToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const [scheme, value] = header.split(' ', 2);
  if (!scheme || !value) return undefined;
  if (scheme.toLowerCase() === 'bearer') return value.trim();
  // Browsers cannot send bearer tokens to Bull Board: accept Basic with the token as password.
  if (scheme.toLowerCase() === 'basic') {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return colon >= 0 ? decoded.slice(colon + 1) : undefined;
  }
  return undefined;
}

/**
 * Requires a bearer token on every route but `/healthz` and `/v1/echo` when tokens are configured. With no
 * tokens (allowed only on a loopback bind) everything is open.
 */
export function requireToken(tokens: readonly string[]): MiddlewareHandler {
  const digests = tokens.map(digest);
  return async (c, next) => {
    // /healthz and the readiness echo (it tells a caller only its own address) stay open.
    if (digests.length === 0 || c.req.path === '/healthz' || c.req.path === '/v1/echo') return next();
    const token = presentedToken(c.req.header('authorization'));
    if (token !== undefined && matchesAny(token, digests)) return next();
    if (c.req.path.startsWith('/admin/')) c.header('WWW-Authenticate', 'Basic realm="egress", charset="UTF-8"');
    else c.header('WWW-Authenticate', 'Bearer realm="egress"');
    return c.json({ error: 'Unauthorized', message: token === undefined ? 'a bearer token is required' : 'the token is not valid' }, 401);
  };
}
