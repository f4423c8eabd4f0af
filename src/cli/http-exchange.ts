/**
 * One HTTP request and its whole answer, on node:http (node:https for an https URL). The CLI's client
 * uses this rather than `fetch`: Node's fetch compiles its HTTP parser at the first call, which cost a
 * short command like `egress get ph` more CPU than everything else it does. The answer is read up to
 * a cap (src/http/capped-body.ts): an API that answers without end fails the command, not the machine.
 */
import type { RequestOptions } from 'node:http';
import { readCappedBody } from '../http/capped-body.ts';

export interface HttpAnswer {
  status: number;
  statusText: string;
  text: string;
}

export interface HttpExchangeOptions {
  method: string;
  headers: Record<string, string>;
  body?: string | undefined;
  signal: AbortSignal;
  /** The most of an answer's body read; past it the request fails with ResponseTooLargeError (default 256 MiB). */
  maxBodyBytes?: number;
}

export const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

export async function httpExchange(url: string, options: HttpExchangeOptions): Promise<HttpAnswer> {
  const target = new URL(url);
  const { request } = target.protocol === 'https:' ? await import('node:https') : await import('node:http');
  const requestOptions: RequestOptions = { method: options.method, headers: options.headers, signal: options.signal };
  return new Promise<HttpAnswer>((resolve, reject) => {
    const req = request(target, requestOptions, (res) => {
      readCappedBody(req, res, options.maxBodyBytes ?? MAX_ANSWER_BYTES, `${options.method} ${target.pathname}`).then(
        (body) => resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', text: body.toString('utf8') }),
        reject,
      );
    });
    req.on('error', reject);
    req.end(options.body);
  });
}
