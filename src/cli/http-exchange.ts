/**
 * One HTTP request and its whole answer, on node:http (node:https for an https URL). The CLI's client
 * uses this rather than `fetch`: Node's fetch compiles its HTTP parser at the first call, which cost a
 * short command like `egress get ph` more CPU than everything else it does.
 */
import type { IncomingMessage, RequestOptions } from 'node:http';
import { EgressError } from '../errors.ts';

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
  /** The most of an answer's body read; past it the request fails (default 256 MiB). */
  maxBodyBytes?: number;
}

export const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

/** An answer larger than the client reads. */
export class AnswerTooLargeError extends EgressError {
  constructor(url: string, limit: number) {
    super('ERR_API_ANSWER_TOO_LARGE', `the answer of ${url} is larger than ${limit} bytes`, { retryable: false });
  }
}

export async function httpExchange(url: string, options: HttpExchangeOptions): Promise<HttpAnswer> {
  const target = new URL(url);
  const { request } = target.protocol === 'https:' ? await import('node:https') : await import('node:http');
  const limit = options.maxBodyBytes ?? MAX_ANSWER_BYTES;
  const requestOptions: RequestOptions = { method: options.method, headers: options.headers, signal: options.signal };
  return new Promise<HttpAnswer>((resolve, reject) => {
    const req = request(target, requestOptions, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > limit) {
          req.destroy(new AnswerTooLargeError(url, limit));
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}
