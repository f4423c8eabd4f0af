import { getConnInfo } from '@hono/node-server/conninfo';
import { Hono } from 'hono';

/** Where the API serves the echo (its path is among those a listener at its cap still answers). */
export const ECHO_PATH = '/v1/echo';

export interface EchoBody {
  address: string;
}

/** An IPv4 address seen on a dual-stack socket (`::ffff:1.2.3.4`) as plain IPv4. */
export function normalizeAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice('::ffff:'.length) : address;
}

/** The body of `GET /v1/echo`: the caller's address as the server saw it. */
export function echoBody(remoteAddress: string | undefined): EchoBody {
  return { address: remoteAddress === undefined ? '' : normalizeAddress(remoteAddress) };
}

/**
 * `GET /echo` answering `{ "address": "<caller's address>" }`; the readiness probe fetches it
 * through a proxy to learn the proxy's egress IP. Mount under `/v1`: `app.route('/v1', echoRoute())`.
 * Needs the app to be served by @hono/node-server (it reads the socket's remote address).
 */
export function echoRoute(): Hono {
  const app = new Hono();
  app.get(ECHO_PATH.slice('/v1'.length), (c) => {
    c.header('cache-control', 'no-store');
    // Every proxy comes here once per probe interval: kept alive in the proxies' upstream pools,
    // a fleet would hold one idle connection per proxy and relay on the API, taking its
    // connection share from the other clients. The answer ends the connection.
    c.header('connection', 'close');
    return c.json(echoBody(getConnInfo(c).remote.address));
  });
  return app;
}
