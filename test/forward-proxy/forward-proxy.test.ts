/**
 * The forward proxy core (src/forward-proxy) against real origins on loopback, driven by node's
 * own HTTP client and raw sockets: what a crawler sees of header handling, upstream keep-alive,
 * refusals and failures, tunnels, and close. The egress policy on top of it is the SSRF suite's.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { basicCredentials } from '../../src/forward-proxy/basic-credentials.ts';
import { endToEndHeaders } from '../../src/forward-proxy/hop-by-hop.ts';
import { absoluteTarget, authorityTarget, BadTarget } from '../../src/forward-proxy/request-target.ts';
import { listenForwardProxy, type ForwardProxy } from '../../src/forward-proxy/server.ts';
import { freePort } from '../../src/redis/redis-server.ts';
import type { Admission, Destination, ForwardProxyOptions } from '../../src/forward-proxy/types.ts';

const AUTH = `Basic ${Buffer.from('u:p').toString('base64')}`;
const closers: (() => Promise<unknown> | void)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

interface Origin {
  port: number;
  /** Every request the origin received: its raw headers and the connection's ordinal. */
  seen: { rawHeaders: string[]; connection: number; url: string }[];
  connections: number;
}

async function origin(handler?: (req: IncomingMessage, res: ServerResponse, connection: number) => void): Promise<Origin> {
  const state: Origin = { port: 0, seen: [], connections: 0 };
  const numbers = new WeakMap<Socket, number>();
  const server: Server = createServer((req, res) => {
    const connection = numbers.get(req.socket) ?? -1;
    state.seen.push({ rawHeaders: req.rawHeaders, connection, url: req.url ?? '' });
    if (handler) return handler(req, res, connection);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain', 'x-hop': 'gone', connection: 'x-hop' });
      res.end(`hello ${connection}`);
    });
  });
  server.on('connection', (s: Socket) => numbers.set(s, ++state.connections));
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  state.port = (server.address() as AddressInfo).port;
  closers.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return state;
}

async function proxy(overrides: Partial<ForwardProxyOptions> = {}): Promise<{ proxy: ForwardProxy; decided: Destination[]; failures: string[] }> {
  const decided: Destination[] = [];
  const failures: string[] = [];
  const admit = (credentials: { username: string; password: string } | undefined, destination: Destination): Promise<Admission> => {
    decided.push(destination);
    if (credentials?.username !== 'u' || credentials.password !== 'p') {
      return Promise.resolve({ allowed: false, status: 407, message: 'credentials', headers: { 'proxy-authenticate': 'Basic realm="t"' } });
    }
    return Promise.resolve({ allowed: true });
  };
  const p = await listenForwardProxy({
    host: '127.0.0.1',
    port: 0,
    admit,
    generation: () => 1,
    maxConnections: 64,
    headersTimeoutMs: 10_000,
    keepAliveTimeoutMs: 5_000,
    onUpstreamFailure: (f) => failures.push(`${f.status} ${f.kind}`),
    ...overrides,
  });
  closers.push(() => p.close());
  return { proxy: p, decided, failures };
}

function viaProxy(
  proxyPort: number,
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; agent?: Agent } = {},
): Promise<{ status: number; headers: IncomingMessage['headers']; rawHeaders: string[]; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: proxyPort,
        method: options.method ?? 'GET',
        path: url,
        headers: { 'proxy-authorization': AUTH, ...options.headers },
        agent: options.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, text: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const names = (raw: readonly string[]): string[] => raw.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());

describe('parsing what a client sends', () => {
  test('Basic credentials: absent, malformed (another scheme), a user with an empty password, a colon in the password', () => {
    expect(basicCredentials(undefined)).toBeUndefined();
    expect(basicCredentials('Bearer abc')).toBe('malformed');
    expect(basicCredentials('Basic')).toBe('malformed');
    expect(basicCredentials(`basic ${Buffer.from('alice').toString('base64')}`)).toEqual({ username: 'alice', password: '' });
    expect(basicCredentials(`Basic ${Buffer.from('alice:a:b').toString('base64')}`)).toEqual({ username: 'alice', password: 'a:b' });
  });

  test('request targets: absolute http:// only for plain requests, host:port only for CONNECT, spellings kept for the policy', () => {
    expect(absoluteTarget('http://[::1]:8080/a?b=1')).toEqual({ hostname: '[::1]', connectHost: '::1', port: 8080, path: '/a?b=1', authority: '[::1]:8080' });
    expect(absoluteTarget('http://example.test/').port).toBe(80);
    expect(() => absoluteTarget('/origin-form')).toThrow(BadTarget);
    expect(() => absoluteTarget('https://example.test/')).toThrow(/use CONNECT/);
    expect(authorityTarget('0x7f.1:443')).toMatchObject({ hostname: '0x7f.1', port: 443 });
    expect(authorityTarget('[::1]:22')).toMatchObject({ hostname: '[::1]', connectHost: '::1', port: 22 });
    for (const bad of ['example.test', 'example.test:443/x', 'u@example.test:443', '']) expect(() => authorityTarget(bad)).toThrow(BadTarget);
  });

  test('hop-by-hop headers go, with every header Connection names; the rest keep case, order and repeats', () => {
    const raw = [
      'Host',
      'h',
      'Connection',
      'keep-alive, X-Secret',
      'X-Secret',
      's',
      'Proxy-Authorization',
      'Basic x',
      'Set-Cookie',
      'a',
      'set-cookie',
      'b',
      'TE',
      'trailers',
      'Keep-Alive',
      '5',
    ];
    expect(endToEndHeaders(raw, new Set(['host']))).toEqual(['Set-Cookie', 'a', 'set-cookie', 'b']);
  });
});

describe('plain HTTP', () => {
  test('forwards with the target as Host, drops hop-by-hop headers both ways, and keeps the credentials from the origin', async () => {
    const o = await origin();
    const { proxy: p } = await proxy();
    const answer = await viaProxy(p.port, `http://127.0.0.1:${o.port}/path?q=1`, {
      headers: { host: 'elsewhere.example', 'x-keep': '1', 'proxy-connection': 'keep-alive' },
    });
    expect(answer.status).toBe(200);
    const seen = o.seen[0];
    expect(seen?.url).toBe('/path?q=1');
    const sent = names(seen?.rawHeaders ?? []);
    expect(sent).toContain('x-keep');
    expect(sent).not.toContain('proxy-authorization');
    expect(sent).not.toContain('proxy-connection');
    expect(seen?.rawHeaders[sent.indexOf('host') * 2 + 1]).toBe(`127.0.0.1:${o.port}`);
    expect(names(answer.rawHeaders)).not.toContain('x-hop');
  });

  test('reuses upstream connections across client connections, and opens a new one after an origin says Connection: close', async () => {
    const o = await origin((req, res, connection) => {
      const close = req.url === '/close';
      res.writeHead(200, { 'content-length': String(`c${connection}`.length), ...(close ? { connection: 'close' } : {}) });
      res.end(`c${connection}`);
    });
    const { proxy: p } = await proxy();
    const texts: string[] = [];
    for (let i = 0; i < 5; i++) texts.push((await viaProxy(p.port, `http://127.0.0.1:${o.port}/`)).text);
    expect(new Set(texts)).toEqual(new Set(['c1']));
    expect((await viaProxy(p.port, `http://127.0.0.1:${o.port}/close`)).text).toBe('c1');
    expect((await viaProxy(p.port, `http://127.0.0.1:${o.port}/`)).text).toBe('c2');
    expect(o.connections).toBe(2);
  });

  test('a bodyless GET that meets a connection the origin closed as it was reused is sent again on a new one; a POST with a body is not (502)', async () => {
    // The origin drops every second request of a connection unanswered: what a keep-alive race looks like.
    const perConnection = new Map<number, number>();
    const o = await origin((req, res, connection) => {
      const n = (perConnection.get(connection) ?? 0) + 1;
      perConnection.set(connection, n);
      if (n === 2) return void req.socket.destroy();
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    const { proxy: p, failures } = await proxy();
    expect((await viaProxy(p.port, `http://127.0.0.1:${o.port}/`)).status).toBe(200);
    expect((await viaProxy(p.port, `http://127.0.0.1:${o.port}/`)).status).toBe(200);
    expect(o.connections).toBe(2);
    expect(failures).toEqual([]);
    const post = await viaProxy(p.port, `http://127.0.0.1:${o.port}/`, { method: 'POST', body: 'payload' });
    expect(post.status).toBe(502);
    expect(post.text).toContain('reset');
    expect(failures).toEqual(['502 reset']);
  });

  test('a client that leaves in the middle of an answer releases the upstream connection: the origin sees it closed, not paused', async () => {
    let upstream: Socket | undefined;
    const o = await origin((req, res) => {
      upstream = req.socket;
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      // An endless answer: only the proxy's side closing ends it.
      const more = (): void => {
        while (res.write(Buffer.alloc(64 * 1024))) {
          /* until the socket is full */
        }
        res.once('drain', more);
      };
      more();
    });
    const { proxy: p } = await proxy();
    const client = connect(p.port, '127.0.0.1');
    client.write(`GET http://127.0.0.1:${o.port}/ HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    await once(client, 'data');
    const closed = new Promise<void>((resolve) => {
      const socket = upstream as Socket;
      if (socket.destroyed) resolve();
      else socket.once('close', () => resolve());
    });
    client.destroy();
    await closed;
    expect(upstream?.destroyed).toBe(true);
  });

  test('a chunked request body goes upstream chunked: a request hidden in a GET body reaches the origin as body, never as a request', async () => {
    const bodies: string[] = [];
    const o = await origin((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        bodies.push(body);
        res.end('ok');
      });
    });
    const { proxy: p } = await proxy();
    const hidden = `GET /hidden HTTP/1.1\r\nHost: 127.0.0.1:${o.port}\r\n\r\n`;
    const chunk = `${Buffer.byteLength(hidden).toString(16)}\r\n${hidden}\r\n0\r\n\r\n`;
    const socket = connect(p.port, '127.0.0.1');
    let answer = '';
    socket.on('data', (c: Buffer) => (answer += c.toString()));
    socket.write(
      `GET http://127.0.0.1:${o.port}/visible HTTP/1.1\r\nHost: 127.0.0.1:${o.port}\r\nProxy-Authorization: ${AUTH}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunk}`,
    );
    await once(socket, 'close');
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    expect(o.seen.map((r) => r.url)).toEqual(['/visible']);
    expect(bodies).toEqual([hidden]);
  });

  test('an origin answering a malformed head is a 502; the proxy keeps serving', async () => {
    const bad = createTcpServer((c) => c.once('data', () => c.end('HTTP/1.1 200 OK\r\nX-Bad: a\x7fb\r\nContent-Length: 2\r\n\r\nok')));
    bad.listen(0, '127.0.0.1');
    await once(bad, 'listening');
    closers.push(() => new Promise((resolve) => bad.close(resolve)));
    const o = await origin();
    const { proxy: p, failures } = await proxy();
    expect((await viaProxy(p.port, `http://127.0.0.1:${(bad.address() as AddressInfo).port}/`)).status).toBe(502);
    expect(failures).toEqual(['502 error']);
    expect((await viaProxy(p.port, `http://127.0.0.1:${o.port}/`)).status).toBe(200);
  });

  test('a refused destination is a 502 naming why; the client connection stays usable', async () => {
    const port = await freePort();
    const o = await origin();
    const { proxy: p, failures } = await proxy();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    closers.push(() => agent.destroy());
    const refused = await viaProxy(p.port, `http://127.0.0.1:${port}/`, { agent });
    expect(refused).toMatchObject({ status: 502, text: 'The destination could not be reached: refused\n' });
    expect((await viaProxy(p.port, `http://127.0.0.1:${o.port}/`, { agent })).status).toBe(200);
    expect(failures).toEqual(['502 refused']);
  });

  test('refusals: 407 with the challenge, 400 for an origin-form request, https://, or credentials that are not Basic', async () => {
    const o = await origin();
    const { proxy: p, decided } = await proxy();
    const noAuth = await viaProxy(p.port, `http://127.0.0.1:${o.port}/`, {
      headers: { 'proxy-authorization': `Basic ${Buffer.from('u:wrong').toString('base64')}` },
    });
    expect(noAuth.status).toBe(407);
    expect(noAuth.headers['proxy-authenticate']).toBe('Basic realm="t"');
    expect((await viaProxy(p.port, '/local')).status).toBe(400);
    expect((await viaProxy(p.port, 'https://example.test/')).text).toMatch(/use CONNECT/);
    expect((await viaProxy(p.port, `http://127.0.0.1:${o.port}/`, { headers: { 'proxy-authorization': 'Bearer t' } })).status).toBe(400);
    expect(decided.map((d) => d.request?.path)).toEqual(['/']);
    expect(o.seen).toEqual([]);
  });
});

describe('CONNECT', () => {
  /** Opens a tunnel; resolves with the socket once the proxy's answer head arrived (and the bytes after it). */
  function tunnel(proxyPort: number, to: string, first?: string): Promise<{ socket: Socket; head: string; rest: string }> {
    return new Promise((resolve, reject) => {
      const socket = connect(proxyPort, '127.0.0.1');
      let data = '';
      const onData = (chunk: Buffer): void => {
        data += chunk.toString('latin1');
        const end = data.indexOf('\r\n\r\n');
        if (end === -1) return;
        socket.off('data', onData);
        resolve({ socket, head: data.slice(0, end), rest: data.slice(end + 4) });
      };
      socket.on('data', onData);
      socket.on('error', reject);
      socket.write(`CONNECT ${to} HTTP/1.1\r\nHost: ${to}\r\nProxy-Authorization: ${AUTH}\r\n\r\n${first ?? ''}`);
    });
  }

  async function echoServer(): Promise<{ port: number; server: TcpServer; ends: number[] }> {
    const ends: number[] = [];
    const server = createTcpServer({ allowHalfOpen: true }, (s) => {
      s.on('data', (c: Buffer) => s.write(c));
      s.on('end', () => {
        ends.push(1);
        s.end('bye');
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    return { port: (server.address() as AddressInfo).port, server, ends };
  }

  test('relays both ways, bytes sent with the CONNECT first, and passes a half-close on', async () => {
    const echo = await echoServer();
    const { proxy: p } = await proxy();
    const t = await tunnel(p.port, `127.0.0.1:${echo.port}`, 'early;');
    expect(t.head).toBe('HTTP/1.1 200 Connection Established');
    let received = t.rest;
    t.socket.on('data', (c: Buffer) => (received += c.toString()));
    t.socket.write('late;');
    t.socket.end();
    await once(t.socket, 'close');
    expect(received).toBe('early;late;bye');
    expect(echo.ends).toEqual([1]);
  });

  test('a download larger than every buffer, to a client that reads slowly, arrives whole and in order, then ends', async () => {
    // Random bytes: a reused read buffer overwritten under a pending write would change them.
    const payload = randomBytes(24 << 20);
    const server = createTcpServer((s) => {
      s.once('data', () => {
        let at = 0;
        const more = (): void => {
          while (at < payload.length) if (!s.write(payload.subarray(at, (at += 1 << 20)))) return void s.once('drain', more);
          s.end();
        };
        more();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    const { proxy: p } = await proxy();
    const t = await tunnel(p.port, `127.0.0.1:${(server.address() as AddressInfo).port}`, 'go');
    const hash = createHash('sha256').update(t.rest, 'latin1');
    let length = Buffer.byteLength(t.rest, 'latin1');
    // 4 KiB a turn of the event loop: slower than the proxy writes, so its writes back up and wait.
    t.socket.pause();
    const ended = once(t.socket, 'end');
    const readSome = (): void => {
      const chunk = t.socket.read(4096) as Buffer | null;
      if (chunk === null) return void t.socket.once('readable', readSome);
      hash.update(chunk);
      length += chunk.length;
      setImmediate(readSome);
    };
    readSome();
    await ended;
    expect(length).toBe(payload.length);
    expect(hash.digest('hex')).toBe(createHash('sha256').update(payload).digest('hex'));
  });

  test('a client that stops reading and then vanishes releases its destination: the proxy closes that connection too', async () => {
    const chunk = Buffer.alloc(1 << 20, 7);
    let destination!: Socket;
    let backedUp!: () => void;
    const stalled = new Promise<void>((resolve) => (backedUp = resolve));
    const server = createTcpServer((s) => {
      destination = s;
      s.on('error', () => undefined);
      // Writes until its own write is refused: the proxy has stopped reading, or soon will.
      s.once('data', () => {
        const more = (): void => {
          while (s.write(chunk));
          backedUp();
          s.once('drain', more);
        };
        more();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    const { proxy: p } = await proxy();
    const t = await tunnel(p.port, `127.0.0.1:${(server.address() as AddressInfo).port}`, 'go');
    t.socket.pause();
    await stalled;
    // The proxy may reset it (unread bytes on its side): an error on the way to 'close' is expected.
    const destinationClosed = new Promise((resolve) => destination.once('close', resolve));
    t.socket.destroy();
    await destinationClosed;
    expect(destination.destroyed).toBe(true);
  });

  test('a refused destination answers 502 and closes; close() ends live tunnels', async () => {
    const echo = await echoServer();
    const { proxy: p } = await proxy();
    const dead = await freePort();
    const refused = await tunnel(p.port, `127.0.0.1:${dead}`);
    expect(refused.head).toMatch(/^HTTP\/1\.1 502 Bad Gateway/);
    await once(refused.socket, 'close');
    const live = await tunnel(p.port, `127.0.0.1:${echo.port}`);
    const ended = once(live.socket, 'close');
    await p.close();
    await ended;
    expect(live.socket.destroyed).toBe(true);
  });
});
