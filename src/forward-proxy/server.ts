/**
 * A forward proxy (HTTP/1.1 with CONNECT) on node:http: plain requests go out over a bounded
 * keep-alive pool per destination, tunnels are two sockets piped together. What may be reached,
 * and by whom, is the caller's `admit`: it runs for every request and every tunnel before
 * anything connects. No package of its own: bundled into the proxy programs as it is.
 */
import { createServer, type Agent, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Agent as TlsAgent } from 'node:https';
import { isIPv6, type Socket } from 'node:net';
import { closeSilentSockets } from '../http/connection-limits.ts';
import { answer, answerSocket } from './answers.ts';
import { basicCredentials } from './basic-credentials.ts';
import { forwardRequest } from './plain-http.ts';
import { absoluteTarget, authorityTarget, BadTarget } from './request-target.ts';
import { openTunnel } from './tunnel.ts';
import { acceptSocks5, SOCKS5_ANSWERS } from './socks5-server.ts';
import type { Admission, Admitted, Destination, ForwardProxyOptions, TrafficKind } from './types.ts';
import { upstreamAgents, UPSTREAM_LIMITS } from './upstream-agents.ts';
import type { ChainHop } from './chain-hop.ts';
import type { UpstreamFailure } from './upstream-failure.ts';

/** A forward proxy that is not listening itself: connections come in as `server`'s `connection` events. */
export interface ForwardProxyCore {
  readonly server: Server;
  /** Stops listening (when it does) and ends every connection now: clients, tunnels, idle upstream sockets. */
  close(): Promise<void>;
}

export interface ForwardProxy extends ForwardProxyCore {
  readonly port: number;
}

const MALFORMED_AUTH = 'Proxy-Authorization must be Basic credentials\n';

/** A failure of `admit` itself (not a refusal): the client gets a 500 and the proxy keeps serving. */
function admitFailed(err: unknown): Admission {
  return { allowed: false, status: 500, message: `The proxy could not decide on this request: ${(err as Error).message}\n` };
}

/** Where a request's answer goes: a plain request's response, or a CONNECT's raw socket. */
interface ClientSide {
  refuse(status: number, message: string, headers?: Readonly<Record<string, string>>): void;
  gone(): boolean;
  abandon(): void;
}

const responseSide = (res: ServerResponse): ClientSide => ({
  refuse: (status, message, headers) => answer(res, status, message, headers),
  gone: () => res.destroyed,
  abandon: () => res.destroy(),
});

const socketSide = (socket: Socket): ClientSide => ({
  refuse: (status, message, headers) => answerSocket(socket, status, message, headers),
  gone: () => socket.destroyed,
  abandon: () => socket.destroy(),
});

/**
 * The proxy's request handling on an HTTP server that does not listen yet: `listenForwardProxy`
 * listens with it; a relay process feeds it the connections of a listening socket it was handed.
 */
export function createForwardProxy(options: Omit<ForwardProxyOptions, 'host' | 'port'>): ForwardProxyCore {
  const agents = upstreamAgents(options.generation);
  const live = new Set<Socket>();
  /** Keep-alive connections to an https:// hop (an http:// hop uses the generation's pool: its address is the key). */
  let tlsHopAgent: TlsAgent | undefined;
  const agentFor = (hop: ChainHop | undefined): Agent => {
    if (hop?.scheme !== 'https') return agents.current().agent;
    tlsHopAgent ??= new TlsAgent({
      keepAlive: true,
      maxSockets: UPSTREAM_LIMITS.perDestination,
      maxFreeSockets: UPSTREAM_LIMITS.idlePerDestination,
      timeout: UPSTREAM_LIMITS.idleMs,
    });
    return tlsHopAgent;
  };
  /** The hop a request or tunnel goes through (read at each), and who is told its bytes when it ends: the chain's counts, accounting, both or neither. */
  const routeOf = (hostname: string, kind: TrafficKind): { hop?: ChainHop; onTraffic?: (sent: number, received: number) => void } => {
    const hop = options.chain?.();
    const chained = hop ? options.onChainTraffic : undefined;
    const account = options.onTraffic;
    let onTraffic: ((sent: number, received: number) => void) | undefined = chained;
    if (account) {
      onTraffic = chained
        ? (sent, received) => {
            chained(sent, received);
            account(hostname, kind, sent, received);
          }
        : (sent, received) => account(hostname, kind, sent, received);
    }
    return { ...(hop ? { hop } : {}), ...(onTraffic ? { onTraffic } : {}) };
  };
  const source = options.localAddress ? { localAddress: options.localAddress, family: isIPv6(options.localAddress) ? (6 as const) : (4 as const) } : {};
  const failed =
    (destination: Destination) =>
    (failure: UpstreamFailure, err: unknown): void =>
      options.onUpstreamFailure?.(failure, destination, err);

  /**
   * One request or CONNECT: its target read (400 when it is not one), its credentials read (400
   * when not Basic), then `admit`, then `proceed` with what was admitted. A failing `admit` answers
   * 500; should `proceed` throw, the client's connection is closed and `onError` told.
   */
  const serve = <T>(
    req: IncomingMessage,
    client: ClientSide,
    parse: (url: string | undefined) => T,
    destinationOf: (target: T) => Destination,
    proceed: (target: T, admitted: Admitted, destination: Destination) => void,
    answerOwn?: ForwardProxyOptions['answerOwn'],
  ): void => {
    let target: T;
    try {
      target = parse(req.url);
    } catch (err) {
      if (!(err instanceof BadTarget)) throw err;
      return client.refuse(400, `${err.message}\n`);
    }
    const credentials = basicCredentials(req.headers['proxy-authorization']);
    if (credentials === 'malformed') return client.refuse(400, MALFORMED_AUTH);
    const destination = destinationOf(target);
    const own = answerOwn?.(credentials, destination);
    if (own) return client.refuse(own.status, own.body, own.headers);
    options
      .admit(credentials, destination)
      .then(undefined, admitFailed)
      .then((admission) => {
        if (!admission.allowed) return client.refuse(admission.status, admission.message, admission.headers);
        if (!client.gone()) proceed(target, admission, destination);
      })
      .catch((err: unknown) => {
        client.abandon();
        options.onError?.(err);
      });
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse): void =>
    serve(
      req,
      responseSide(res),
      absoluteTarget,
      (t) => ({ hostname: t.hostname, port: t.port, request: { method: req.method ?? '', path: t.path } }),
      (t, admitted, destination) => {
        const route = routeOf(destination.hostname, 'request');
        forwardRequest(req, res, t, {
          pool: agents.current().origins,
          agent: agentFor(route.hop),
          admitted,
          ...source,
          ...route,
          onFailure: failed(destination),
        });
      },
      options.answerOwn,
    );

  const onConnect = (req: IncomingMessage, socket: Socket, head: Buffer): void => {
    socket.pause();
    serve(
      req,
      socketSide(socket),
      authorityTarget,
      (t) => ({ hostname: t.hostname, port: t.port }),
      (t, admitted, destination) =>
        openTunnel(socket, head, t, { admitted, ...source, ...routeOf(destination.hostname, 'tunnel'), live, onFailure: failed(destination) }),
    );
  };

  const server = createServer(onRequest);
  server.on('connect', onConnect);
  // A client socket's errors (a reset mid-answer) end that socket only.
  server.on('connection', (socket: Socket) => socket.on('error', () => socket.destroy()));
  server.maxConnections = options.maxConnections;
  server.headersTimeout = options.headersTimeoutMs;
  server.keepAliveTimeout = options.keepAliveTimeoutMs;
  closeSilentSockets(server, options.headersTimeoutMs);
  const socks5 = options.socks5;
  if (socks5) {
    // Last: it defers every `connection` listener above until the first byte says HTTP.
    acceptSocks5(
      server,
      {
        authenticate: (username, password) => socks5.authenticate(username, password),
        admit: (credentials, destination) => options.admit(credentials, destination).then(undefined, admitFailed),
        tunnel: (client, target, admitted, destination) =>
          openTunnel(client, Buffer.alloc(0), target, {
            admitted,
            ...source,
            ...routeOf(destination.hostname, 'tunnel'),
            live,
            answers: SOCKS5_ANSWERS,
            onFailure: failed(destination),
          }),
        ...(options.onError ? { onError: options.onError } : {}),
      },
      options.headersTimeoutMs,
    );
  }
  let closing: Promise<void> | undefined;
  return {
    server,
    close() {
      closing ??= new Promise<void>((resolve) => {
        if (server.listening) server.close(() => resolve());
        else resolve();
        server.closeAllConnections();
        for (const s of live) s.destroy();
        agents.destroy();
        tlsHopAgent?.destroy();
      });
      return closing;
    },
  };
}

/** Starts the proxy listening; resolves once it listens (rejects with the listen error, EADDRINUSE included). */
export async function listenForwardProxy(options: ForwardProxyOptions): Promise<ForwardProxy> {
  const core = createForwardProxy(options);
  const { server } = core;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  return { port, server, close: () => core.close() };
}
