/**
 * A plain-HTTP request that goes straight to its destination (no upstream proxy): sent on a
 * connection of the origin pool with undici's client, its answer written to the client as it
 * comes, with backpressure both ways.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { answer } from './answers.ts';
import { endToEndHeaders } from './hop-by-hop.ts';
import type { OriginPool, Lease } from './origin-pool.ts';
import type { AbsoluteTarget } from './request-target.ts';
import { takeBytes } from './upstream-bytes.ts';
import { upstreamFailure, type UpstreamFailure } from './upstream-failure.ts';

/**
 * Dropped from the client's request besides what is hop-by-hop: its Host (the target's is sent),
 * and Expect (node's server has already answered the client's `100-continue`; the body is sent
 * as it comes).
 */
const DROP_FROM_REQUEST = new Set(['host', 'expect']);
export const METHODS_RETRIED = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
/** Errors of a reused connection the origin had closed as the request went out. */
const CLOSED_UNDER_US = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

export interface DirectContext {
  pool: OriginPool;
  address: Parameters<OriginPool['acquire']>[0];
  onFailure: (failure: UpstreamFailure, err: unknown) => void;
  onTraffic?: (sent: number, received: number) => void;
}

const clientGone = (): NodeJS.ErrnoException => Object.assign(new Error('the client went away'), { code: 'ECONNRESET' });

/** True when the request carries no body: it can be sent again as it was. */
export function bodyless(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0');
}

/**
 * Forwards one admitted request. An idempotent request without a body that fails on a reused
 * connection before any answer (the origin closed it as we sent) is sent once more; any other
 * failure before the answer's head is a 502 or 504 to the client, and after it the client's
 * connection is cut (the answer cannot be completed honestly).
 */
export function forwardDirect(req: IncomingMessage, res: ServerResponse, target: AbsoluteTarget, context: DirectContext): void {
  const headers = endToEndHeaders(req.rawHeaders, DROP_FROM_REQUEST);
  headers.push('Host', target.authority);
  const method = req.method ?? 'GET';
  const body = bodyless(req) ? null : req;
  const replayable = body === null && METHODS_RETRIED.has(method);
  const { pool, onTraffic } = context;
  let lease: Lease | undefined;
  let abort: ((err?: Error) => void) | undefined;
  let withdraw: (() => void) | undefined;
  let counted = false;
  const count = (): void => {
    if (counted || !onTraffic || !lease) return;
    counted = true;
    const [sent, received] = takeBytes(lease.socket());
    onTraffic(sent, received);
  };
  const fail = (err: unknown): void => {
    if (res.headersSent) return void res.destroy();
    const failure = upstreamFailure(err);
    context.onFailure(failure, err);
    answer(res, failure.status, `The destination could not be reached: ${failure.kind}\n`);
  };
  res.once('close', () => {
    if (res.writableFinished) return;
    withdraw?.();
    abort?.(clientGone());
  });

  const send = (retry: boolean): void => {
    withdraw = pool.acquire(context.address, (got) => {
      withdraw = undefined;
      if (got instanceof Error) return fail(got);
      const mine = got;
      if (res.destroyed) return pool.release(mine, true);
      lease = mine;
      let answered = false;
      let unrelayable = false;
      const handler: Dispatcher.DispatchHandlers = {
        onConnect(abortRequest) {
          abort = abortRequest;
          // The client left while the connection was being made: nothing is sent.
          if (res.destroyed) abortRequest(clientGone());
        },
        onHeaders(status, raw, resume, statusText) {
          // 1xx interim answers (103 Early Hints) are not relayed: node's server cannot send them ahead of the answer.
          if (status < 200) return true;
          answered = true;
          res.sendDate = false;
          try {
            res.writeHead(status, statusText, endToEndHeaders(raw.map((b) => b.toString('latin1'))));
          } catch (err) {
            // A head undici's parser took but node's writer refuses: the request ends in onError.
            unrelayable = true;
            abort?.(err as Error);
            return false;
          }
          res.on('drain', resume);
          return true;
        },
        onData(chunk) {
          return res.write(chunk);
        },
        onComplete() {
          count();
          pool.release(mine, true);
          res.end();
        },
        onError(err) {
          pool.release(mine, false);
          // What a connection the origin had closed carried before is not this request's.
          if (retry && mine.reused && !answered && CLOSED_UNDER_US.has((err as NodeJS.ErrnoException).code ?? '') && !res.destroyed) return send(false);
          count();
          if (!unrelayable) return fail(err);
          context.onFailure({ status: 502, kind: 'error' }, err);
          answer(res, 502, 'The destination answered with a head that cannot be relayed\n');
        },
      };
      got.client.dispatch({ path: target.path, method: method as Dispatcher.HttpMethod, headers, body }, handler);
    });
  };
  send(replayable);
}
