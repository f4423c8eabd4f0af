import { Hono, type Context } from 'hono';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import type { Registry } from 'prom-client';
import { refuse } from '../http/request-guards.ts';
import type { OtherAuthentication } from '../http/auth.ts';
import { etagOf } from '../proxies/discovery.ts';
import { consoleAssets, ConsoleAssetsMissingError, type ConsoleAssets } from './assets.ts';
import { consoleHeaders, sameOriginFetch } from './page-security.ts';
import { consolePage } from './page.ts';
import type { ConsoleSession, ConsoleSessions } from './sessions.ts';
import { readCounters } from './counters.ts';
import { CounterHistory } from './counter-history.ts';

/** Where the console is served, and the only path its cookie is sent to. */
export const CONSOLE_PATH = '/console';
export const SESSION_COOKIE = 'egress_console';
/** The header the page sends its session's CSRF token in, with every API request. */
export const CSRF_HEADER = 'x-egress-csrf';
/** Console pages answered without the read deadline: they touch no store. */
export const CONSOLE_PAGES = [CONSOLE_PATH, `${CONSOLE_PATH}/sign-in`];
/** Longest token a sign-in accepts. */
const MAX_TOKEN = 4096;

/**
 * Marks a request the console dispatches to /v1 on behalf of a signed-in session: the Hono env
 * of `app.fetch`, which no network request can set. Its value is the session's caller name.
 */
const CONSOLE_CALLER = Symbol('egress.console.caller');

export type Dispatch = (request: Request, env: Record<symbol, string>) => Promise<Response>;

export interface ConsoleRouteDeps {
  sessions: ConsoleSessions;
  /** The caller name of a valid API token, else undefined (src/http/auth.ts tokenMatcher). */
  matchToken: (presented: string) => string | undefined;
  /** Whether the API has tokens at all: without them (loopback only) any sign-in is accepted. */
  hasTokens: boolean;
  /** Runs a request through the whole API (its guards, auth and routes): `app.fetch`. */
  dispatch: Dispatch;
  registry: Registry;
  /** Where Bull Board is mounted, for links to failed jobs. */
  boardPath: string;
  /** Session lifetime, for the cookie's Max-Age. */
  sessionTtlMs: number;
}

/** How requireToken lets the console through: its own paths, and the /v1 requests it dispatches. */
export const consoleAuthentication: OtherAuthentication = {
  selfAuthenticated: (path) => path === CONSOLE_PATH || path.startsWith(`${CONSOLE_PATH}/`),
  callerOf: (c) => {
    const env = c.env as Record<symbol, unknown> | undefined;
    const caller = env?.[CONSOLE_CALLER];
    return typeof caller === 'string' ? caller : undefined;
  },
};

function secure(c: Context): boolean {
  return new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto') === 'https';
}

/** The signed-in session of a request, or undefined. */
function sessionOf(c: Context, sessions: ConsoleSessions): ConsoleSession | undefined {
  return sessions.get(getCookie(c, SESSION_COOKIE));
}

type Guarded = { session: ConsoleSession } | { refusal: Response };

/** A console API request: from this origin, signed in, carrying the session's CSRF token. */
function guardApi(c: Context, sessions: ConsoleSessions): Guarded {
  const crossSite = sameOriginFetch(c);
  if (crossSite) return { refusal: crossSite };
  const session = sessionOf(c, sessions);
  if (!session) return { refusal: refuse(c, 401, 'Unauthorized', 'not signed in to the console (or the session ended): sign in again') };
  if (!sessions.csrfMatches(session, c.req.header(CSRF_HEADER))) {
    return { refusal: refuse(c, 403, 'ERR_CSRF', `refused: the request does not carry this session's ${CSRF_HEADER} header`) };
  }
  return { session };
}

async function loadedAssets(c: Context): Promise<ConsoleAssets | Response> {
  try {
    return await consoleAssets();
  } catch (err) {
    if (err instanceof ConsoleAssetsMissingError) return c.json({ error: err.code, message: err.message }, 503);
    throw err;
  }
}

/** Headers of the page's request that the API sees again when the console dispatches it. */
const FORWARDED_HEADERS = ['accept', 'content-type', 'host', 'origin', 'user-agent', 'sec-fetch-site'];

/** The console: its page, its files, sign-in and sign-out, and `/console/v1/*` → the API's `/v1/*` as the session's caller. */
export function consoleRoutes(deps: ConsoleRouteDeps): Hono {
  const app = new Hono();
  app.use('*', consoleHeaders());

  // The process's own counters over time, for the page's small time series: sampled from the first sign-in on.
  const history = new CounterHistory(() => readCounters(deps.registry));

  const page = async (c: Context, view: 'app' | 'sign-in', session?: ConsoleSession): Promise<Response> => {
    const assets = await loadedAssets(c);
    if (assets instanceof Response) return assets;
    c.header('Cache-Control', 'no-store');
    return c.html(
      consolePage({
        view,
        base: CONSOLE_PATH,
        script: `${CONSOLE_PATH}/assets/${assets.script.path}`,
        style: `${CONSOLE_PATH}/assets/${assets.style.path}`,
        ...(session ? { caller: session.caller, csrf: session.csrf } : {}),
        boardPath: deps.boardPath,
      }),
    );
  };

  app.get('/sign-in', async (c) => (sessionOf(c, deps.sessions) ? c.redirect(CONSOLE_PATH, 302) : page(c, 'sign-in')));
  app.get('/', async (c) => {
    const session = sessionOf(c, deps.sessions);
    return session ? page(c, 'app', session) : c.redirect(`${CONSOLE_PATH}/sign-in`, 302);
  });

  app.get('/assets/:file', async (c) => {
    const assets = await loadedAssets(c);
    if (assets instanceof Response) return assets;
    const found = assets.byPath(c.req.param('file'));
    if (!found) return c.json({ error: 'ERR_NOT_FOUND', message: 'no such console file' }, 404);
    c.header('Content-Type', found.contentType);
    c.header('Cache-Control', 'public, max-age=31536000, immutable');
    c.header('Vary', 'Accept-Encoding');
    if (/\bgzip\b/.test(c.req.header('accept-encoding') ?? '')) {
      c.header('Content-Encoding', 'gzip');
      return c.body(new Uint8Array(found.gzipped));
    }
    return c.body(new Uint8Array(found.body));
  });

  // Sign-in: the token is checked like a bearer token and then forgotten; the cookie holds a random session id.
  app.post('/session', async (c) => {
    const crossSite = sameOriginFetch(c);
    if (crossSite) return crossSite;
    let body: unknown;
    try {
      body = await c.req.json();
    } catch {
      return refuse(c, 400, 'ERR_BAD_REQUEST', 'sign-in takes a JSON body {"token": "<API token>"}');
    }
    const token = typeof body === 'object' && body !== null ? (body as { token?: unknown }).token : undefined;
    if (typeof token !== 'string' || token.length > MAX_TOKEN) return refuse(c, 400, 'ERR_BAD_REQUEST', 'sign-in takes a JSON body {"token": "<API token>"}');
    const caller = deps.hasTokens ? callerOfPasted(token.trim(), deps.matchToken) : 'anonymous';
    if (caller === undefined) return refuse(c, 401, 'Unauthorized', 'the token is not valid');
    const { id, session } = deps.sessions.create(caller);
    await history.start();
    setCookie(c, SESSION_COOKIE, id, {
      path: CONSOLE_PATH,
      httpOnly: true,
      sameSite: 'Strict',
      secure: secure(c),
      maxAge: Math.floor(deps.sessionTtlMs / 1000),
    });
    c.header('Cache-Control', 'no-store');
    return c.json({ caller: session.caller });
  });

  // Who is signed in (the sign-in page asks, to skip itself when a session is already open).
  app.get('/session', (c) => {
    const crossSite = sameOriginFetch(c);
    if (crossSite) return crossSite;
    const session = sessionOf(c, deps.sessions);
    c.header('Cache-Control', 'no-store');
    return session ? c.json({ caller: session.caller }) : refuse(c, 401, 'Unauthorized', 'not signed in');
  });

  app.post('/sign-out', (c) => {
    const guarded = guardApi(c, deps.sessions);
    if ('refusal' in guarded) return guarded.refusal;
    deps.sessions.delete(getCookie(c, SESSION_COOKIE));
    deleteCookie(c, SESSION_COOKIE, { path: CONSOLE_PATH, httpOnly: true, sameSite: 'Strict', secure: secure(c) });
    return c.body(null, 204);
  });

  app.get('/counters', async (c) => {
    const guarded = guardApi(c, deps.sessions);
    if ('refusal' in guarded) return guarded.refusal;
    c.header('Cache-Control', 'no-store');
    return c.json({ everyMs: history.everyMs, samples: await history.history() });
  });

  app.all('/v1/*', async (c) => {
    const guarded = guardApi(c, deps.sessions);
    if ('refusal' in guarded) return guarded.refusal;
    const url = new URL(c.req.url);
    const path = url.pathname.slice(CONSOLE_PATH.length);
    // Only the API's /v1 routes, whatever dot segments or encodings the request held.
    if (!url.pathname.startsWith(`${CONSOLE_PATH}/v1/`))
      return c.json({ error: 'ERR_NOT_FOUND', message: 'the console reaches the API’s /v1 routes only' }, 404);
    // Lists of proxies carry each one's credentials in proxyUrl: the console drops them (and the
    // text format, which is nothing but them); one proxy's URL is shown only when asked for.
    const listsProxies = path === '/v1/proxies' && c.req.method === 'GET';
    if (listsProxies && (url.searchParams.get('format') ?? 'json') !== 'json') {
      return refuse(c, 400, 'ERR_BAD_REQUEST', 'the console lists proxies as JSON only');
    }
    const headers = new Headers();
    for (const name of FORWARDED_HEADERS) {
      const value = c.req.header(name);
      if (value !== undefined) headers.set(name, value);
    }
    const method = c.req.method;
    const body = method === 'GET' || method === 'HEAD' ? undefined : await c.req.arrayBuffer();
    const inner = new Request(new URL(path + url.search, url), { method, headers, body, signal: c.req.raw.signal });
    const res = await deps.dispatch(inner, { [CONSOLE_CALLER]: guarded.session.caller });
    c.header('Cache-Control', 'no-store');
    if (method !== 'GET' || res.status !== 200) return new Response(res.body, res);
    // Polling with ETags: an unchanged answer is a 304 with no body.
    let text = await res.text();
    if (listsProxies) text = withoutProxyUrls(text);
    const etag = etagOf(text);
    if (c.req.header('if-none-match') === etag) return c.body(null, 304, { ETag: etag, 'Cache-Control': 'no-cache' });
    return c.body(text, 200, { 'Content-Type': res.headers.get('content-type') ?? 'application/json', ETag: etag, 'Cache-Control': 'no-cache' });
  });

  app.get('/*', (c, next) => (c.req.path === `${CONSOLE_PATH}/` ? c.redirect(CONSOLE_PATH, 302) : next()));
  app.all('*', (c) => c.json({ error: 'ERR_NOT_FOUND', message: `no console route for ${c.req.method} ${c.req.path.slice(0, 200)}` }, 404));
  return app;
}

/** The caller of a pasted token: the token itself, or a line of a token file (`name:token`). */
function callerOfPasted(pasted: string, matchToken: (presented: string) => string | undefined): string | undefined {
  const whole = matchToken(pasted);
  if (whole !== undefined) return whole;
  const colon = pasted.indexOf(':');
  return colon > 0 ? matchToken(pasted.slice(colon + 1)) : undefined;
}

function withoutProxyUrls(text: string): string {
  const parsed = JSON.parse(text) as { items?: Record<string, unknown>[] };
  for (const item of parsed.items ?? []) delete item.proxyUrl;
  return JSON.stringify(parsed);
}
