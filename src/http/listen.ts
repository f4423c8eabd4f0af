import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { serve, type HttpBindings, type ServerType } from '@hono/node-server';
import { ConfigError } from '../errors.ts';
import type { Logger } from '../logging.ts';
import { CONNECTIONS_CHECKING_INTERVAL_MS, guardConnections, type ConnectionLimits, type RefusalReason } from './connection-limits.ts';

export interface ListenOptions {
  hostname: string;
  port: number;
  /** The flag that chose the port, named in the error when it is taken (`--port`, `--metrics-port`). */
  portFlag: string;
  /** Where errors of the listening socket go once it listens (failed accepts, say). */
  logger: Logger;
  /** What the listener is, for that log line (`api`, `metrics`). */
  name: string;
  /** Connection caps and timeouts (connection-limits.ts); without, node's defaults (tests of other things). */
  limits?: ConnectionLimits;
  /** The paths answered on reserve sockets (`/healthz`, `/readyz`, the echo). */
  reservedPaths?: readonly string[];
  /** Told of each socket refused at accept and each request refused in the reserve (a metric). */
  onRefused?: (reason: RefusalReason) => void;
}

type Fetch = (req: Request, env: HttpBindings) => Response | Promise<Response>;

/** A refusal is logged once a minute per listener with the count since; the metric counts each. */
function refusalLog(logger: Logger, name: string, limits: ConnectionLimits): (reason: RefusalReason) => void {
  let last = -Infinity;
  let since = 0;
  return (reason) => {
    since++;
    const now = performance.now();
    if (now - last < 60_000) return;
    last = now;
    logger.warn(
      { listener: name, reason, refused: since, maxConnections: limits.maxConnections, reserved: limits.reserved, perPeer: limits.perPeer },
      `${name} listener at its connection cap: refusing connections (logged once a minute)`,
    );
    since = 0;
  };
}

/**
 * Serves `fetch` on `hostname:port`. A failure to listen is a ConfigError naming the flag. Once
 * listening, an error of the server socket (an accept that failed: out of file descriptors) is
 * logged and the listener keeps serving: closing it there would leave a live process that
 * silently refuses every connection.
 */
export function listenHttp(fetch: Fetch, options: ListenOptions): Promise<ServerType> {
  const { hostname, port, portFlag, logger, name, limits } = options;
  const reservedPaths = new Set(options.reservedPaths ?? []);
  const log = limits ? refusalLog(logger, name, limits) : () => undefined;
  const refused = (reason: RefusalReason): void => {
    options.onRefused?.(reason);
    log(reason);
  };
  let inReserve: ((env: HttpBindings) => boolean) | undefined;
  const guarded: Fetch = (req, env) => {
    if (!inReserve?.(env)) return fetch(req, env);
    // One answer per reserve socket, and only of the reserved paths.
    env.outgoing.setHeader('connection', 'close');
    if (reservedPaths.has(new URL(req.url).pathname)) return fetch(req, env);
    refused('reserved-only');
    return new Response(JSON.stringify({ error: 'Unavailable', message: `the ${name} listener is at its connection cap; try again shortly` }), {
      status: 503,
      headers: { 'content-type': 'application/json', 'retry-after': '1' },
    });
  };
  return new Promise<ServerType>((resolve, reject) => {
    const onStartError = (err: NodeJS.ErrnoException): void => {
      server.close();
      if (err.code === 'EADDRINUSE')
        reject(
          new ConfigError(portFlag, `${hostname}:${port} is already in use (EADDRINUSE): another process listens there; choose another ${portFlag}`, {
            cause: err,
          }),
        );
      else if (err.code === 'EADDRNOTAVAIL')
        reject(new ConfigError('--host', `cannot listen on ${hostname}:${port}: not an address of this machine (EADDRNOTAVAIL)`, { cause: err }));
      else if (err.code === 'EACCES') reject(new ConfigError(portFlag, `cannot listen on ${hostname}:${port}: permission denied (EACCES)`, { cause: err }));
      else reject(err);
    };
    const server = serve(
      {
        fetch: (req, env) => guarded(req, env as HttpBindings),
        hostname,
        port,
        ...(limits ? { serverOptions: { connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS } } : {}),
      },
      () => {
        server.off('error', onStartError);
        const address = server.address() as AddressInfo;
        server.on('error', (err: NodeJS.ErrnoException) =>
          logger.error({ listener: name, port: address.port, code: err.code, err: err.message }, `${name} listener error; still listening`),
        );
        resolve(server);
      },
    );
    if (limits) {
      const guard = guardConnections(server as Server, limits, refused);
      inReserve = (env) => guard.inReserve(env.incoming.socket);
    }
    server.once('error', onStartError);
  });
}
