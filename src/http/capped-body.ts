/**
 * Reading an HTTP answer's body with a size cap, for every client of a peer that may answer without
 * end (the CLI's client of the API, the kubernetes check): past the cap — or a `content-length` over
 * it — the request's socket is destroyed and the read fails with ResponseTooLargeError.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { EgressError } from '../errors.ts';

/** A peer's answer was larger than its reader's cap. Retryable: the next call asks again. */
export class ResponseTooLargeError extends EgressError {
  readonly limit: number;
  constructor(what: string, limit: number) {
    super('ERR_RESPONSE_TOO_LARGE', `${what}: the response body was larger than ${limit} bytes; it was not read further`, { retryable: true });
    this.limit = limit;
  }
}

/** The whole body of `res` (the answer to `req`), or ResponseTooLargeError once it passes `maxBytes`. */
export function readCappedBody(req: ClientRequest, res: IncomingMessage, maxBytes: number, what: string): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const tooLarge = (): void => {
      req.destroy();
      reject(new ResponseTooLargeError(what, maxBytes));
    };
    if (Number(res.headers['content-length'] ?? 0) > maxBytes) {
      tooLarge();
      return;
    }
    const parts: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        tooLarge();
        return;
      }
      parts.push(chunk);
    });
    res.on('error', reject);
    res.on('end', () => resolve(Buffer.concat(parts)));
  });
}
