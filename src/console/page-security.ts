import type { Context, MiddlewareHandler } from 'hono';
import { refuse } from '../http/request-guards.ts';

/**
 * The console's Content-Security-Policy: everything from this origin only, no inline script or
 * style, no eval, no frames, no plugins, forms and links only back here. The page works air-gapped.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers on every console answer (pages, files, JSON): the CSP and the usual browser hardening. */
export function consoleHeaders(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    c.header('Content-Security-Policy', CONSOLE_CSP);
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('X-Frame-Options', 'DENY');
    c.header('Referrer-Policy', 'no-referrer');
    c.header('Cross-Origin-Opener-Policy', 'same-origin');
    c.header('Cross-Origin-Resource-Policy', 'same-origin');
    c.header('Permissions-Policy', 'camera=(), microphone=(), geolocation=()');
  };
}

/**
 * A request the page made itself from this origin: a browser sends `Sec-Fetch-Site: same-origin`
 * (older ones send nothing); `same-site`, `cross-site` or `none` (typed in the address bar, which
 * a fetch never is) are refused. `Origin`, where sent, must be this host.
 */
export function sameOriginFetch(c: Context): Response | undefined {
  const site = c.req.header('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin') {
    return refuse(c, 403, 'ERR_CROSS_ORIGIN', `refused: a console request must come from the console's own page (Sec-Fetch-Site "${site.slice(0, 40)}")`);
  }
  const origin = c.req.header('origin');
  if (origin !== undefined) {
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    if (host === undefined || host !== (c.req.header('host') ?? '').toLowerCase()) {
      return refuse(c, 403, 'ERR_CROSS_ORIGIN', `refused: Origin "${origin.slice(0, 100)}" is not this console`);
    }
  }
  return undefined;
}
