import { request, type Agent, type ClientRequest, type IncomingMessage, type RequestOptions, type ServerResponse } from 'node:http';
import { request as tlsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { bodyless, forwardDirect, METHODS_RETRIED } from './direct-request.ts';
import type { OriginPool } from './origin-pool.ts';
import { connectThroughHop, hopStatusCode } from './chain-connect.ts';
import { hopAuthorization, type ChainHop } from './chain-hop.ts';
import { CONNECT_TIMEOUT_MS } from './tunnel.ts';
import { answer } from './answers.ts';
import { endToEndHeaders } from './hop-by-hop.ts';
import type { AbsoluteTarget } from './request-target.ts';
import type { Admitted } from './types.ts';
import { UPSTREAM_IDLE_MS } from './upstream-agents.ts';
import { takeBytes } from './upstream-bytes.ts';
import { upstreamFailure, upstreamTimeout, type UpstreamFailure } from './upstream-failure.ts';

/** The client's Host is replaced by the target's; the rest of what is hop-by-hop goes in endToEndHeaders. */
const DROP_FROM_REQUEST = new Set(['host']);

export interface ForwardContext {
  /** The keep-alive connections of a request that goes straight to its destination. */
  pool: OriginPool;
  /** The keep-alive pool of a request that goes through an http(s) hop. */
  agent: Agent;
  admitted: Admitted;
  localAddress?: string;
  family?: 4 | 6;
  onFailure: (failure: UpstreamFailure, err: unknown) => void;
  /**
   * The upstream proxy the request goes through (issue 24). An http(s) hop gets the request in
   * absolute form with its own Proxy-Authorization, over `agent` (the hop's keep-alive pool); a
   * socks5 hop carries it over a new tunnel to the destination.
   */
  hop?: ChainHop;
  /**
   * Told once, when the answer ends (or the request fails), the bytes the upstream connection
   * carried for this request: its head and body as sent, the answer's head and body as received.
   */
  onTraffic?: (sent: number, received: number) => void;
}

/**
 * Forwards one admitted plain-HTTP request and relays the answer: straight to the destination on
 * the origin pool (direct-request.ts), or through the hop on node's HTTP client. Either way, an
 * idempotent request without a body that fails on a reused connection before any answer (the
 * origin closed it as we sent) is sent once more on a new one; any other failure before the
 * answer's head is a 502 or 504 to the client, and after it the client connection is cut (the
 * answer cannot be completed honestly).
 */
export function forwardRequest(req: IncomingMessage, res: ServerResponse, target: AbsoluteTarget, context: ForwardContext): void {
  if (!context.hop) {
    const { lookup } = context.admitted;
    const address = {
      host: target.connectHost,
      port: target.port,
      ...(lookup ? { lookup } : {}),
      ...(context.localAddress ? { localAddress: context.localAddress, family: context.family } : {}),
    };
    const onTraffic = context.onTraffic;
    return forwardDirect(req, res, target, { pool: context.pool, address, onFailure: context.onFailure, ...(onTraffic ? { onTraffic } : {}) });
  }
  const headers = endToEndHeaders(req.rawHeaders, DROP_FROM_REQUEST);
  headers.push('Host', target.authority);
  // Transfer-Encoding is hop-by-hop, but the body it framed is not: sent on unframed (node frames
  // a GET's body only when told), it would be read upstream as further requests (smuggling).
  if (req.headers['transfer-encoding'] !== undefined) headers.push('Transfer-Encoding', 'chunked');
  const options: RequestOptions = {
    host: target.connectHost,
    port: target.port,
    method: req.method ?? 'GET',
    path: target.path,
    headers,
    setHost: false,
    agent: context.agent,
    timeout: UPSTREAM_IDLE_MS,
    ...(context.admitted.lookup ? { lookup: context.admitted.lookup } : {}),
    ...(context.localAddress ? { localAddress: context.localAddress, family: context.family } : {}),
  };
  if (context.hop) chainOptions(options, context.hop, target, context);
  const replayable = bodyless(req) && METHODS_RETRIED.has(options.method ?? '');
  const send0 = context.hop?.scheme === 'https' ? tlsRequest : request;
  let upstream: ClientRequest | undefined;
  const onTraffic = context.onTraffic;
  let counted = false;
  // Before the socket goes back to the pool (its `free` comes a tick after the answer's end).
  const count = (): void => {
    if (counted || !onTraffic) return;
    counted = true;
    const [sent, received] = takeBytes(upstream?.socket);
    onTraffic(sent, received);
  };
  res.once('close', () => {
    if (!res.writableFinished) upstream?.destroy();
    count();
  });

  const send = (retry: boolean): void => {
    const up = send0(options);
    upstream = up;
    up.setTimeout(UPSTREAM_IDLE_MS, () => up.destroy(upstreamTimeout('the destination')));
    up.once('response', (answerIn: IncomingMessage) => {
      if (onTraffic) answerIn.on('end', count);
      // The hop's own refusal is not the destination's answer: the client gets a 502 that says so.
      if (context.hop && context.hop.scheme !== 'socks5' && answerIn.statusCode === 407) {
        answerIn.resume();
        const err = Object.assign(new Error('the upstream proxy answered HTTP 407'), { code: hopStatusCode(407) });
        const failure = upstreamFailure(err);
        context.onFailure(failure, err);
        return answer(res, failure.status, `The destination could not be reached: ${failure.kind}\n`);
      }
      relay(answerIn, res, context.onFailure);
    });
    up.once('error', (err) => {
      if (retry && up.reusedSocket && !res.headersSent && (err as NodeJS.ErrnoException).code === 'ECONNRESET') return send(false);
      if (res.headersSent) return void res.destroy();
      const failure = upstreamFailure(err);
      context.onFailure(failure, err);
      answer(res, failure.status, `The destination could not be reached: ${failure.kind}\n`);
    });
    if (replayable) up.end();
    else req.pipe(up);
  };
  send(replayable);
}

/**
 * Points a request at the hop: for http(s), the hop's address with the absolute-form target and
 * its credentials; for socks5, a connection made through it to the destination (no keep-alive).
 */
function chainOptions(options: RequestOptions, hop: ChainHop, target: AbsoluteTarget, context: ForwardContext): void {
  delete options.lookup;
  if (hop.scheme === 'socks5') {
    // No agent at all: with one (even `agent: false`, which makes a fresh one) node ignores createConnection and connects directly.
    delete options.agent;
    const source = context.localAddress ? { localAddress: context.localAddress, family: context.family } : {};
    options.createConnection = ((_o: unknown, done: (err: Error | null, socket?: Socket) => void) => {
      connectThroughHop(hop, target.connectHost, target.port, { timeoutMs: CONNECT_TIMEOUT_MS, ...source }).then(
        (socket) => {
          takeBytes(socket);
          socket.resume();
          done(null, socket);
        },
        (err: unknown) => done(err as Error),
      );
      return undefined;
    }) as unknown as RequestOptions['createConnection'];
    return;
  }
  options.host = hop.host;
  options.port = hop.port;
  options.path = `http://${target.authority}${target.path}`;
  if (hop.scheme === 'https') {
    Object.assign(options, { servername: hop.servername ?? hop.host, ...(hop.ca ? { ca: hop.ca } : {}) });
  }
  const auth = hopAuthorization(hop);
  if (auth) (options.headers as string[]).push('Proxy-Authorization', auth);
}

function relay(answerIn: IncomingMessage, res: ServerResponse, onFailure: ForwardContext['onFailure']): void {
  if (res.destroyed) return void answerIn.destroy();
  res.sendDate = false;
  try {
    res.writeHead(answerIn.statusCode ?? 502, answerIn.statusMessage, endToEndHeaders(answerIn.rawHeaders));
  } catch (err) {
    // A head node's parser took but its writer refuses (it runs in an event handler: thrown, it would end the process).
    answerIn.destroy();
    onFailure({ status: 502, kind: 'error' }, err);
    return answer(res, 502, 'The destination answered with a head that cannot be relayed\n');
  }
  answerIn.once('close', () => {
    if (!answerIn.complete) res.destroy();
  });
  answerIn.pipe(res);
}
