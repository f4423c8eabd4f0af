/**
 * The data-plane benchmark's load generator: `concurrency` keep-alive connections, each sending
 * one request at a time (no pipelining) until `requests` have been answered in all, timing each.
 * Raw sockets and a minimal HTTP/1.1 response reader (Content-Length bodies), so the generator is
 * not what limits the rate. The same code drives every row: direct to the origin, plain HTTP
 * through a proxy (absolute URI + Proxy-Authorization), and CONNECT (one tunnel per connection,
 * then origin-form requests inside it).
 */
import type { Socket } from 'node:net';
import { open, ResponseReader } from './support/raw-http-client.ts';
import { summarize } from './stats.ts';

export type LoadMode = 'direct' | 'proxy' | 'connect';

export interface LoadOptions {
  mode: LoadMode;
  /** Where the connections go: the origin (direct) or the proxy. */
  host: string;
  port: number;
  origin: { host: string; port: number };
  /** `user:password` for Proxy-Authorization (proxy and connect modes). */
  auth?: string;
  concurrency: number;
  requests: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  /** Connections the server closed after a response (it does not keep client connections alive), opened again. */
  reconnects: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

/** A new connection to `host:port`, through a CONNECT tunnel to `tunnelTo` when given (`auth`: a Proxy-Authorization line or ''). */
async function openConnection(host: string, port: number, tunnelTo: string | undefined, auth: string): Promise<{ socket: Socket; reader: ResponseReader }> {
  const socket = await open(host, port);
  const reader = new ResponseReader(socket);
  if (tunnelTo !== undefined) {
    socket.write(`CONNECT ${tunnelTo} HTTP/1.1\r\nHost: ${tunnelTo}\r\n${auth}\r\n`);
    const { status } = await reader.next(true).catch((err: Error) => {
      socket.destroy();
      throw err;
    });
    if (status !== 200) {
      socket.destroy();
      throw new Error(`CONNECT answered ${status}`);
    }
  }
  return { socket, reader };
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const originHost = `${o.origin.host}:${o.origin.port}`;
  const auth = o.auth ? `Proxy-Authorization: Basic ${Buffer.from(o.auth).toString('base64')}\r\n` : '';
  const request =
    o.mode === 'proxy'
      ? `GET http://${originHost}/bench HTTP/1.1\r\nHost: ${originHost}\r\n${auth}Proxy-Connection: keep-alive\r\n\r\n`
      : `GET /bench HTTP/1.1\r\nHost: ${originHost}\r\n\r\n`;
  const latencies: number[] = [];
  let issued = 0;
  let errors = 0;
  let reconnects = 0;
  const connection = (): Promise<{ socket: Socket; reader: ResponseReader }> =>
    openConnection(o.host, o.port, o.mode === 'connect' ? originHost : undefined, auth);
  const worker = async (): Promise<void> => {
    let conn: { socket: Socket; reader: ResponseReader } | undefined;
    let served = 0;
    while (issued < o.requests) {
      issued++;
      const t0 = performance.now();
      try {
        for (let attempt = 0; ; attempt++) {
          if (!conn || conn.reader.closed) {
            if (conn) reconnects++;
            conn?.socket.destroy();
            conn = await connection();
            served = 0;
          }
          conn.socket.write(request);
          try {
            const { status, close } = await conn.reader.next();
            if (status !== 200) throw new Error(`answered ${status}`);
            served++;
            if (close) conn.reader.closed = true;
            break;
          } catch (err) {
            // A server that closes idle client connections without saying so (tinyproxy does after every
            // response): a request on a connection that already served one is sent again on a new one, as HTTP clients do.
            if (served === 0 || attempt > 0) throw err;
            conn.reader.closed = true;
          }
        }
        latencies.push(performance.now() - t0);
      } catch {
        errors++;
        conn?.socket.destroy();
        conn = undefined;
      }
    }
    conn?.socket.destroy();
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  const { p50, p99 } = summarize(latencies);
  return { requests: latencies.length, errors, reconnects, seconds, rps: latencies.length / seconds, p50Ms: p50, p99Ms: p99 };
}

export interface DownloadOptions {
  /** `direct` to the origin, or `connect` through the proxy's tunnel. */
  mode: 'direct' | 'connect';
  host: string;
  port: number;
  origin: { host: string; port: number };
  auth?: string;
  /** The origin's path that answers `bytes` bytes. */
  path: string;
  bytes: number;
}

export interface DownloadResult {
  bytes: number;
  seconds: number;
  /** MB/s (10^6 bytes). */
  mbPerSecond: number;
}

/** One download of `bytes` over one connection (one CONNECT tunnel in connect mode), counted as it arrives, nothing kept. */
export async function runDownload(o: DownloadOptions): Promise<DownloadResult> {
  const originHost = `${o.origin.host}:${o.origin.port}`;
  const auth = o.auth ? `Proxy-Authorization: Basic ${Buffer.from(o.auth).toString('base64')}\r\n` : '';
  const { socket } = await openConnection(o.host, o.port, o.mode === 'connect' ? originHost : undefined, auth);
  // The body is counted as it arrives, not read whole: the reader lets go of the socket's data.
  socket.removeAllListeners('data');
  try {
    const started = performance.now();
    socket.write(`GET ${o.path} HTTP/1.1\r\nHost: ${originHost}\r\n\r\n`);
    const received = await new Promise<number>((resolve, reject) => {
      let head: Buffer | undefined = Buffer.alloc(0);
      let body = 0;
      socket.on('data', (chunk: Buffer) => {
        if (head !== undefined) {
          head = Buffer.concat([head, chunk]);
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) return;
          const status = Number(head.subarray(9, 12).toString('latin1'));
          if (status !== 200) return reject(new Error(`download answered ${status}`));
          body = head.length - end - 4;
          head = undefined;
        } else body += chunk.length;
        if (body >= o.bytes) resolve(body);
      });
      socket.once('error', reject);
      socket.once('close', () => reject(new Error(`connection closed after ${body} of ${o.bytes} bytes`)));
    });
    const seconds = (performance.now() - started) / 1000;
    return { bytes: received, seconds, mbPerSecond: received / 1e6 / seconds };
  } finally {
    socket.destroy();
  }
}
