import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { ClientErrorStatusCode } from 'hono/utils/http-status';
import { parseAuthority } from './host-authority.ts';

/**
 * Defences every request passes before a route sees it: the body size, the `Host` (against DNS
 * rebinding), the `Origin` and the media type of mutating requests (against cross-site requests).
 * Each refusal is a 4xx with JSON `{error, message}` naming the reason.
 */

/** Media types a mutating request may carry: JSON, or YAML as `egress apply` sends it. */
export const MUTATION_MEDIA_TYPES: readonly string[] = ['application/json', 'application/yaml', 'application/x-yaml', 'text/yaml'];

/**
 * A refusal. The connection is not closed at once: @hono/node-server drains an unread body for at
 * most 500 ms / 64 MiB after the answer and then closes, so the client reads the answer instead of
 * a reset (closing a socket with unread data sends RST, which can discard the answer in flight).
 */
export function refuse(c: Context, status: ClientErrorStatusCode, error: string, message: string): Response {
  return c.json({ error, message }, status);
}

/**
 * Answers 413 as soon as the declared length, or the bytes read so far of a chunked body, pass
 * `maxBytes`. A GET or HEAD passes untouched: no route reads their body (an unread body is drained
 * within the server's bound, as after a refusal), and looking at it would build a full Fetch
 * Request for every read — on the pick route, a measurable part of each pick.
 */
export function limitBody(maxBytes: number): MiddlewareHandler {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: (c) => refuse(c, 413, 'ERR_BODY_TOO_LARGE', `the request body is larger than ${maxBytes} bytes (--max-body-size)`),
  });
  return (c, next) => (c.req.method === 'GET' || c.req.method === 'HEAD' ? next() : limit(c, next));
}

/**
 * The `Host` names an API without tokens answers to: its bound address with its port,
 * `localhost` (any port: a rebinding page can never be `localhost`), the extra names of
 * `--allowed-host` and the host of the readiness echo URL. `bind()` sets the address once the
 * server listens (the port may have been 0).
 */
export class HostAllowList {
  readonly #extra: { hostname: string; port: string | undefined }[];
  #bound: { hostname: string; port: string } | undefined;

  /** `extra`: `name` (any port) or `name:port` entries, as --allowed-host takes them. */
  constructor(extra: readonly string[]) {
    this.#extra = extra.flatMap((e) => {
      const a = parseAuthority(e);
      if (!a) return [];
      return [{ hostname: a.hostname, port: /:\d+$/.test(e) ? a.port : undefined }];
    });
  }

  bind(address: string, port: number): void {
    const host = address.includes(':') ? `[${address}]` : address;
    this.#bound = parseAuthority(`${host}:${port}`);
  }

  allows(header: string | undefined): boolean {
    if (header === undefined) return false;
    const a = parseAuthority(header);
    if (!a) return false;
    if (a.hostname === 'localhost') return true;
    if (this.#bound && a.hostname === this.#bound.hostname && a.port === this.#bound.port) return true;
    return this.#extra.some((e) => e.hostname === a.hostname && (e.port === undefined || e.port === a.port));
  }
}

/** Refuses, on every route, a `Host` the allow list does not hold (only used while there are no tokens). */
export function requireAllowedHost(hosts: HostAllowList): MiddlewareHandler {
  return async (c, next) => {
    const host = c.req.header('host');
    if (hosts.allows(host)) return next();
    return refuse(
      c,
      403,
      'ERR_HOST_NOT_ALLOWED',
      `Host "${(host ?? '').slice(0, 100)}" is not an address of this API; without --api-token-file it answers only to its own address and localhost (add names with --allowed-host)`,
    );
  };
}

function isMutation(method: string): boolean {
  return method !== 'GET' && method !== 'HEAD';
}

/** Refuses a mutating request whose `Origin` is present and is not this API (the `Host` it was sent to). */
export function requireSameOrigin(): MiddlewareHandler {
  return async (c, next) => {
    const origin = c.req.header('origin');
    if (origin === undefined || !isMutation(c.req.method)) return next();
    const host = c.req.header('host');
    let same = false;
    try {
      const u = new URL(origin);
      same = (u.protocol === 'http:' || u.protocol === 'https:') && host !== undefined && u.host === host.toLowerCase();
    } catch {
      same = false;
    }
    if (same) return next();
    return refuse(c, 403, 'ERR_CROSS_ORIGIN', `cross-origin ${c.req.method} refused: Origin "${origin.slice(0, 100)}" is not this API`);
  };
}

function hasBody(c: Context): boolean {
  const length = c.req.header('content-length');
  return c.req.header('transfer-encoding') !== undefined || (length !== undefined && length !== '0');
}

/**
 * A mutating request carries JSON or YAML, or nothing at all: a bodyless request without a
 * Content-Type (Bull Board's buttons, `egress check`) is allowed, as a browser sends one cross-site
 * only with an `Origin`, which `requireSameOrigin` refuses. Forms and `text/plain` never pass.
 */
export function requireMutationMediaType(): MiddlewareHandler {
  return async (c, next) => {
    if (!isMutation(c.req.method)) return next();
    const type = c.req.header('content-type');
    if (type === undefined && !hasBody(c)) return next();
    const media = (type ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
    if (MUTATION_MEDIA_TYPES.includes(media)) return next();
    return refuse(
      c,
      415,
      'ERR_UNSUPPORTED_MEDIA_TYPE',
      `Content-Type "${(type ?? '').slice(0, 100)}" is not accepted for ${c.req.method}: send ${MUTATION_MEDIA_TYPES.join(', ')}`,
    );
  };
}
