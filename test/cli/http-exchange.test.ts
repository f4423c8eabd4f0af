import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { httpExchange } from '../../src/cli/http-exchange.ts';
import { ResponseTooLargeError } from '../../src/http/capped-body.ts';

let server: Server | undefined;

/** A loopback server whose every answer is written by `answer`; resolves its base URL. */
async function serve(answer: Parameters<typeof createServer>[1]): Promise<string> {
  server = createServer(answer);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

const options = { method: 'GET', headers: {}, signal: AbortSignal.timeout(30_000), maxBodyBytes: 1024 };

describe("the CLI's HTTP exchange reads an answer only up to its cap", () => {
  it('returns status, status text and the whole body within the cap', async () => {
    const url = await serve((_req, res) => res.writeHead(404, 'Nope').end('x'.repeat(1024)));
    expect(await httpExchange(`${url}/v1/proxies`, options)).toEqual({ status: 404, statusText: 'Nope', text: 'x'.repeat(1024) });
  });

  it('refuses an answer whose content-length passes the cap, before reading it', async () => {
    const url = await serve((_req, res) => res.writeHead(200, { 'content-length': 1025 }).end('y'.repeat(1025)));
    const err = await httpExchange(`${url}/v1/proxies`, options).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ResponseTooLargeError);
    expect((err as ResponseTooLargeError).message).toBe('GET /v1/proxies: the response body was larger than 1024 bytes; it was not read further');
  });

  it('stops reading a chunked answer that never ends, once it passes the cap, and closes the connection', async () => {
    let closed: Promise<unknown> = Promise.resolve();
    const url = await serve((req, res) => {
      closed = once(req.socket, 'close');
      res.writeHead(200);
      const more = (): void => void (res.write('z'.repeat(512)) ? setImmediate(more) : res.once('drain', more));
      more();
    });
    await expect(httpExchange(`${url}/v1/events`, options)).rejects.toBeInstanceOf(ResponseTooLargeError);
    await closed;
  });
});
