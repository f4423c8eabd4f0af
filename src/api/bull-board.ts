import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import type { Queue } from 'bullmq';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import type { Logger } from '../logging.ts';
import { storeUnavailableResponse } from './store-unavailable.ts';

export const BULL_BOARD_PATH = '/admin/queues';

export interface BullBoardDeps {
  /** True while Redis is connected: the board's failures are then the request's fault. */
  storeConnected: () => boolean;
  logger: Logger;
}

/** The first path segment or query parameter that is not valid percent-encoded text (or holds a control character). */
function malformedPart(rawUrl: string): string | undefined {
  const u = new URL(rawUrl);
  const parts: [string, string][] = u.pathname.split('/').map((s) => ['path', s]);
  for (const pair of u.search.slice(1).split('&')) {
    const [name = '', value = ''] = pair.split('=', 2);
    parts.push([`query parameter "${safeName(name)}"`, name], [`query parameter "${safeName(name)}"`, value]);
  }
  for (const [what, raw] of parts) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(raw.replace(/\+/g, ' '));
    } catch {
      return `${what}: malformed percent-encoding`;
    }
    if ([...decoded].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f)) return `${what}: control characters are not allowed`;
  }
  return undefined;
}

function safeName(name: string): string {
  return name.replace(/[^\w.-]/g, '?').slice(0, 40);
}

/** Bull Board's add-job route: `POST /admin/queues/api/queues/{queue}/add` `{name, data, options}`. */
const ADD_JOB = /\/api\/queues\/[^/]+\/add$/;

/**
 * What is wrong with a body Bull Board would act on, if anything. Its adapter reads a body that
 * does not parse as `{}`: a truncated `{"name":"x"` would add a job with no name. Empty bodies are
 * fine (the UI sends none with most requests) but for the add-job route, which needs a job name.
 */
async function badBody(c: Context): Promise<string | undefined> {
  const text = await c.req.text();
  const addsJob = c.req.method === 'POST' && ADD_JOB.test(c.req.path);
  if (text.trim() === '') return addsJob ? 'the body must be a JSON object naming the job ("name")' : undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return `the body is not valid JSON: ${(err as Error).message.slice(0, 200)}`;
  }
  if (!addsJob) return undefined;
  const name = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as { name?: unknown }).name : undefined;
  return typeof name === 'string' && name.trim() !== '' ? undefined : 'field "name": a job needs a non-empty name';
}

/**
 * Bull Board answers 500 to requests it cannot parse (`?status=%00`, `?activeQueue=%ZZ`) and acts
 * on bodies it cannot parse as if they were empty: refuse malformed ones up front, and turn what it still fails on into a 400 while Redis is up (503 while
 * it is down), never a 5xx that blames us for a client's bytes.
 */
function guardBoard(deps: BullBoardDeps): MiddlewareHandler {
  return async (c, next) => {
    const malformed = malformedPart(c.req.url);
    if (malformed) return c.json({ error: 'ERR_BAD_REQUEST', message: `Bull Board request refused: ${malformed}` }, 400);
    const body = c.req.method === 'GET' || c.req.method === 'HEAD' ? undefined : await badBody(c);
    if (body) return c.json({ error: 'ERR_BAD_REQUEST', message: `Bull Board request refused, nothing done: ${body}` }, 400);
    await next();
    if (c.res.status < 500) return;
    const detail = await c.res
      .clone()
      .json()
      .then((b: unknown) => {
        const message = (b as { message?: unknown }).message;
        return typeof message === 'string' ? message.slice(0, 200) : '';
      })
      .catch(() => '');
    if (!deps.storeConnected()) {
      c.res = storeUnavailableResponse(c, 'Redis is unreachable; try again');
      return;
    }
    deps.logger.info({ path: c.req.path.slice(0, 200), status: c.res.status, detail }, 'bull board could not serve a request');
    c.res = c.json({ error: 'ERR_BAD_REQUEST', message: `Bull Board could not serve this request${detail ? `: ${detail}` : ''}` }, 400);
  };
}

/**
 * Every Bull Board response may load from this API only: no font, script, stylesheet or request
 * goes to another origin (an air-gapped machine would wait on them; a remote one would learn who
 * looks at the board). Inline styles and scripts stay allowed: the UI's page uses them.
 */
export const BULL_BOARD_CSP = "default-src 'self' 'unsafe-inline' data: blob:; base-uri 'self'; form-action 'self'; frame-ancestors 'self'";

/** A tag of the page that loads from another origin (the UI's Google Fonts stylesheet). */
const EXTERNAL_TAG = /<(?:link|script)\b[^>]*\b(?:href|src)\s*=\s*["']?(?:https?:)?\/\/[^>]*>(?:\s*<\/script>)?\s*/gi;

/** The page without its tags that load from another origin: it renders with the stylesheet's fallback fonts (system-ui, monospace). */
export function withoutExternalTags(html: string): string {
  return html.replace(EXTERNAL_TAG, '');
}

/** Serves the board's page without outside references, and every board response under BULL_BOARD_CSP. */
function selfContained(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    if ((c.res.headers.get('content-type') ?? '').startsWith('text/html')) {
      const html = withoutExternalTags(await c.res.text());
      const headers = new Headers(c.res.headers);
      headers.delete('content-length');
      c.res = new Response(html, { status: c.res.status, headers });
    }
    c.res.headers.set('Content-Security-Policy', BULL_BOARD_CSP);
  };
}

/** Mounts Bull Board at /admin/queues (behind the API's token check, like every route). */
export function mountBullBoard(app: Hono, queues: readonly Queue[], deps: BullBoardDeps): void {
  const adapter = new HonoAdapter(serveStatic);
  adapter.setBasePath(BULL_BOARD_PATH);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q, { allowRetries: true })),
    serverAdapter: adapter,
    options: { uiConfig: { boardTitle: 'egress-proxies', miscLinks: [{ text: 'Metrics', url: '/metrics' }] } },
  });
  app.use(BULL_BOARD_PATH, selfContained());
  app.use(`${BULL_BOARD_PATH}/*`, selfContained(), guardBoard(deps));
  app.route(BULL_BOARD_PATH, adapter.registerPlugin());
}
