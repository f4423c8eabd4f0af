/**
 * What the traffic suites send through real proxies and where it lands: an origin that counts the
 * bytes its connections carried (what the proxy's upstream side really sent and received), and
 * clients for a tunnel over HTTP CONNECT and over SOCKS5, each sending one request and reading the
 * answer to its end.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { connectThroughHop } from '../../src/forward-proxy/chain-connect.ts';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';

export interface CountingOrigin {
  host: string;
  port: number;
  /** Bytes its connections received and sent, so far. */
  received(): number;
  sent(): number;
  close(): Promise<void>;
}

/** An HTTP origin on `host` answering every request, once its body is read, with `answerBytes` bytes. */
export async function countingOrigin(host: string, answerBytes = 1000): Promise<CountingOrigin> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    req.resume();
    req.once('end', () => res.end('o'.repeat(answerBytes)));
  });
  server.on('connection', (socket: Socket) => sockets.add(socket));
  server.listen(0, host);
  await once(server, 'listening');
  const sum = (pick: (s: Socket) => number): number => [...sockets].reduce((n, s) => n + pick(s), 0);
  return {
    host,
    port: (server.address() as AddressInfo).port,
    received: () => sum((s) => s.bytesRead),
    sent: () => sum((s) => s.bytesWritten),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Writes `request` on `socket` and resolves with everything read until it ends. */
function exchange(socket: Socket, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (data += chunk));
    socket.once('end', () => {
      socket.destroy();
      resolve(data);
    });
    socket.once('error', reject);
    socket.write(request);
  });
}

/** A GET of `path` from `host:port` with `Connection: close` (the tunnel ends with the answer), as raw HTTP/1.1. */
export function closingGet(host: string, port: number, path = '/', body = ''): string {
  return `${body ? 'POST' : 'GET'} ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
}

const basic = (c: ProxyCredentials): string => `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;

/** CONNECT `authority` through the proxy at `proxyPort`, then `request` inside; the CONNECT's status and the tunnelled answer. */
export async function tunnelExchange(
  proxyPort: number,
  credentials: ProxyCredentials,
  authority: string,
  request: string,
): Promise<{ status: number; answer: string }> {
  const socket = connect(proxyPort, '127.0.0.1');
  socket.setEncoding('latin1');
  await once(socket, 'connect');
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${basic(credentials)}\r\n\r\n`);
  let head = '';
  while (!head.includes('\r\n\r\n')) {
    const [chunk] = (await once(socket, 'data')) as [string];
    head += chunk;
  }
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  if (status !== 200) {
    socket.destroy();
    return { status, answer: '' };
  }
  return { status, answer: await exchange(socket, request) };
}

/** A SOCKS5 CONNECT (username/password) to `host:port` through the proxy, then `request` inside; the answer. */
export async function socksExchange(proxyPort: number, credentials: ProxyCredentials, host: string, port: number, request: string): Promise<string> {
  const socket = await connectThroughHop({ scheme: 'socks5', host: '127.0.0.1', port: proxyPort, ...credentials }, host, port, { timeoutMs: 10_000 });
  socket.resume();
  return exchange(socket, request);
}
