/**
 * A client-node HTTP library that reads at most `maxBytes` of a response body. client-node's own
 * (node-fetch 2) reads a body whole, however large: a 700 MB answer to the one-Pod health check grew
 * the worker past 1 GB before the check's deadline. This one sends the request the same way (the
 * context's URL, method, headers, body, agent with the kubeconfig's TLS material, and signal) over
 * node:http(s), and fails with ResponseTooLargeError, destroying the socket, once the body passes the cap.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import { FetchError, ResponseContext, wrapHttpLibrary, type HttpLibrary, type RequestContext } from '@kubernetes/client-node';
import { readCappedBody } from '../../http/capped-body.ts';

/** What one health-check answer may weigh: a one-item PodList is a few KiB. */
export const CHECK_BODY_BYTES = 1024 * 1024;

/** The HTTP library (for `ConfigurationOptions.httpApi`) that caps every body it reads at `maxBytes`. */
export function cappedHttpLibrary(maxBytes: number): HttpLibrary {
  return wrapHttpLibrary({ send: (ctx) => send(ctx, maxBytes) });
}

function send(ctx: RequestContext, maxBytes: number): Promise<ResponseContext> {
  const url = new URL(ctx.getUrl());
  const transport = url.protocol === 'https:' ? https : http;
  const body = ctx.getBody();
  if (body !== undefined && typeof body !== 'string') return Promise.reject(new TypeError('cappedHttpLibrary sends string bodies only'));
  const signal = ctx.getSignal();
  return new Promise<ResponseContext>((resolve, reject) => {
    const req = transport.request(url, {
      method: String(ctx.getHttpMethod()),
      headers: ctx.getHeaders(),
      agent: ctx.getAgent(),
      ...(signal ? { signal } : {}),
    });
    // Transport failures as node-fetch reports them (a FetchError of type `system` with the errno
    // code), so that classification is the same with either library; an abort stays an abort.
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (signal?.aborted) reject(err);
      else reject(new FetchError(`request to ${url.origin}${url.pathname} failed, reason: ${err.message}`, 'system', err));
    });
    req.on('response', (res) => {
      readCappedBody(req, res, maxBytes, `${String(ctx.getHttpMethod())} ${url.pathname}`).then((data) => {
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
        resolve(
          new ResponseContext(res.statusCode ?? 0, headers, {
            text: () => Promise.resolve(data.toString('utf8')),
            binary: () => Promise.resolve(data),
          }),
        );
      }, reject);
    });
    if (body !== undefined) req.write(body);
    req.end();
  });
}
