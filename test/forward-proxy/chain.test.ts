/**
 * The forward-proxy core chained through real vendors' proxies on loopback (issue 24): tinyproxy
 * and squid with Basic auth (plain HTTP in absolute form with Proxy-Authorization, HTTPS-style
 * tunnels as a CONNECT through them) and dante as a SOCKS5 server with username/password. A crawler
 * talks to our proxy with our credentials only; what the vendor refuses is a 502 that says so.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { promisify } from 'node:util';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ChainHop } from '../../src/forward-proxy/chain-hop.ts';
import { listenForwardProxy, type ForwardProxy } from '../../src/forward-proxy/server.ts';
import type { UpstreamFailure } from '../../src/forward-proxy/upstream-failure.ts';
import { checkEndpoint } from '../../src/providers/upstream/check.ts';
import type { UpstreamEndpoint } from '../../src/providers/upstream/endpoints.ts';
import { NO_REDACTION } from '../../src/secrets/secret-registry.ts';
import { describeWithTool } from '../support/required-tools.ts';
import { getThroughProxy } from '../support/proxy-get.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { danteVendor, squidVendor, tinyproxyVendor, type VendorProxy } from '../support/vendor-proxies.ts';

const run = promisify(execFile);
const OURS = `Basic ${Buffer.from('crawler:ours').toString('base64')}`;
/** Our front at `port`, with the crawler's credentials. */
const ours = (port: number) => ({ port, username: 'crawler', password: 'ours' });

interface Origin {
  port: number;
  /** The Proxy-Authorization headers the origin saw (none may reach it). */
  proxyAuth: (string | undefined)[];
  close(): Promise<void>;
}

async function startOrigin(): Promise<Origin> {
  const proxyAuth: (string | undefined)[] = [];
  const server: Server = createServer((req, res) => {
    proxyAuth.push(req.headers['proxy-authorization']);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`origin saw ${req.method} ${req.url}`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    proxyAuth,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function front(hop: ChainHop, failures: UpstreamFailure[]): Promise<ForwardProxy> {
  return listenForwardProxy({
    host: '127.0.0.1',
    port: 0,
    admit: (credentials) =>
      Promise.resolve(
        credentials?.username === 'crawler' && credentials.password === 'ours' ? { allowed: true } : { allowed: false, status: 407, message: 'no' },
      ),
    generation: () => 1,
    chain: () => hop,
    maxConnections: 64,
    headersTimeoutMs: 10_000,
    keepAliveTimeoutMs: 5_000,
    onUpstreamFailure: (failure) => failures.push(failure),
  });
}

/** A CONNECT through our proxy, then a GET over the tunnel: the status line of the CONNECT answer and what came back. */
function tunnelGet(proxyPort: number, originPort: number): Promise<{ connectStatus: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: proxyPort });
    let text = '';
    let connectStatus = 0;
    socket.setEncoding('latin1');
    socket.once('connect', () =>
      socket.write(`CONNECT 127.0.0.1:${originPort} HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\nProxy-Authorization: ${OURS}\r\n\r\n`),
    );
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (connectStatus === 0 && text.includes('\r\n\r\n')) {
        connectStatus = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
        const rest = text.slice(text.indexOf('\r\n\r\n') + 4);
        text = rest;
        if (connectStatus === 200) socket.write(`GET /tunnelled HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\nConnection: close\r\n\r\n`);
      }
    });
    socket.once('end', () => resolve({ connectStatus, body: text }));
    socket.once('error', reject);
  });
}

const cases: { tool: 'tinyproxy' | 'squid' | 'danted'; scheme: 'http' | 'socks5'; start: (dir: string) => Promise<VendorProxy> }[] = [
  { tool: 'tinyproxy', scheme: 'http', start: (dir) => tinyproxyVendor(dir, 'vendoruser', 'vendor-pass-tiny') },
  { tool: 'squid', scheme: 'http', start: (dir) => squidVendor(dir, 'vendoruser', 'vendor-pass-squid') },
  { tool: 'danted', scheme: 'socks5', start: (dir) => danteVendor(dir) },
];

for (const c of cases) {
  describeWithTool(c.tool, `chained through ${c.tool} (${c.scheme}://)`, { timeout: 60_000 }, () => {
    let vendor: VendorProxy;
    let origin: Origin;
    const proxies: ForwardProxy[] = [];
    beforeAll(async () => {
      vendor = await c.start(await tempDir(`chain-${c.tool}-`));
      origin = await startOrigin();
    }, 60_000);
    afterAll(async () => {
      for (const p of proxies) await p.close();
      await origin?.close();
      await vendor?.stop();
    });
    const hop = (password?: string): ChainHop => ({
      scheme: c.scheme,
      host: '127.0.0.1',
      port: vendor.port,
      username: vendor.user,
      password: password ?? vendor.password,
    });

    test("a plain request reaches the origin through the vendor, with none of the proxies' credentials", async () => {
      const failures: UpstreamFailure[] = [];
      const p = await front(hop(), failures);
      proxies.push(p);
      const answer = await getThroughProxy(ours(p.port), `http://127.0.0.1:${origin.port}/plain?q=1`);
      expect(answer).toEqual({ status: 200, body: expect.stringContaining('GET /plain?q=1') });
      expect(origin.proxyAuth.at(-1)).toBeUndefined();
      expect(failures).toEqual([]);
    });

    test('a CONNECT tunnel goes through the vendor to the origin', async () => {
      const p = await front(hop(), []);
      proxies.push(p);
      const answer = await tunnelGet(p.port, origin.port);
      expect(answer.connectStatus).toBe(200);
      expect(answer.body).toContain('origin saw GET /tunnelled');
    });

    test('a wrong vendor password is a 502 "upstream-auth" for the crawler\'s tunnel, and for its plain request where the vendor answers 407', async () => {
      const failures: UpstreamFailure[] = [];
      const p = await front(hop('not-the-password'), failures);
      proxies.push(p);
      const tunnel = await tunnelGet(p.port, origin.port);
      expect(tunnel.connectStatus).toBe(502);
      const plain = await getThroughProxy(ours(p.port), `http://127.0.0.1:${origin.port}/x`);
      if (c.tool === 'tinyproxy') {
        // tinyproxy refuses a plain request's credentials with 401 and WWW-Authenticate, which no
        // proxy can tell from an origin's 401: it reaches the crawler as it is.
        expect(plain.status).toBe(401);
        expect(failures.map((f) => f.kind)).toEqual(['upstream-auth']);
      } else {
        expect(plain).toEqual({ status: 502, body: 'The destination could not be reached: upstream-auth\n' });
        expect(failures.map((f) => f.kind)).toEqual(['upstream-auth', 'upstream-auth']);
      }
      expect(origin.proxyAuth).not.toContain(expect.anything());
    });
  });
}

describe('chained to a vendor that is not there', () => {
  test('a refused connection to the upstream is a 502 "refused"', async () => {
    const failures: UpstreamFailure[] = [];
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const p = await front({ scheme: 'http', host: '127.0.0.1', port, username: 'u', password: 'p' }, failures);
    try {
      const answer = await getThroughProxy(ours(p.port), 'http://127.0.0.1:9/x');
      expect(answer.status).toBe(502);
      expect(failures.map((f) => f.kind)).toEqual(['refused']);
    } finally {
      await p.close();
    }
  });
});

describe('chained to an https:// vendor', () => {
  let dir: string;
  let cert = '';
  let key = '';
  let vendor: ForwardProxy;
  let tlsFront: TlsServer;
  let tlsPort = 0;
  let origin: Origin;

  beforeAll(async () => {
    dir = await tempDir('chain-tls-');
    await run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=vendor.test',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ]);
    [cert, key] = await Promise.all([readFile(join(dir, 'cert.pem'), 'utf8'), readFile(join(dir, 'key.pem'), 'utf8')]);
    origin = await startOrigin();
    // The vendor: a forward proxy with Basic auth, behind TLS.
    vendor = await listenForwardProxy({
      host: '127.0.0.1',
      port: 0,
      admit: (c) =>
        Promise.resolve(c?.username === 'tlsuser' && c.password === 'tls-pass' ? { allowed: true } : { allowed: false, status: 407, message: 'no' }),
      generation: () => 1,
      maxConnections: 64,
      headersTimeoutMs: 10_000,
      keepAliveTimeoutMs: 5_000,
    });
    tlsFront = createTlsServer({ key, cert }, (tls) => {
      const inner = connect({ host: '127.0.0.1', port: vendor.port });
      tls.pipe(inner).pipe(tls);
      tls.on('error', () => inner.destroy());
      inner.on('error', () => tls.destroy());
    });
    tlsFront.listen(0, '127.0.0.1');
    await once(tlsFront, 'listening');
    tlsPort = (tlsFront.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => tlsFront?.close(resolve));
    await vendor?.close();
    await origin?.close();
  });

  test('with the vendor\'s CA: plain requests and tunnels go through; without it: a 502 "upstream-tls"', async () => {
    const hop: ChainHop = { scheme: 'https', host: '127.0.0.1', port: tlsPort, username: 'tlsuser', password: 'tls-pass', ca: cert };
    const ok = await front(hop, []);
    try {
      expect(await getThroughProxy(ours(ok.port), `http://127.0.0.1:${origin.port}/tls-plain`)).toEqual({ status: 200, body: 'origin saw GET /tls-plain' });
      const tunnel = await tunnelGet(ok.port, origin.port);
      expect(tunnel.connectStatus).toBe(200);
      expect(tunnel.body).toContain('origin saw GET /tunnelled');
    } finally {
      await ok.close();
    }
    const failures: UpstreamFailure[] = [];
    const { ca: _ca, ...untrusted } = hop;
    const bad = await front(untrusted, failures);
    try {
      expect(await getThroughProxy(ours(bad.port), `http://127.0.0.1:${origin.port}/x`)).toEqual({
        status: 502,
        body: 'The destination could not be reached: upstream-tls\n',
      });
      expect((await tunnelGet(bad.port, origin.port)).connectStatus).toBe(502);
      expect(failures.map((f) => f.kind)).toEqual(['upstream-tls', 'upstream-tls']);
    } finally {
      await bad.close();
    }
  });

  test('the health check of such an endpoint: Ok with its CA, Error "TLS" without, Unauthorized with a wrong password', async () => {
    const echo = createServer((req, res) => res.end(JSON.stringify({ address: req.socket.remoteAddress })));
    echo.listen(0, '127.0.0.1');
    await once(echo, 'listening');
    const echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/v1/echo`;
    const endpoint = (hop: Partial<ChainHop>): UpstreamEndpoint => ({
      name: 't1',
      proxy: 'v-t1',
      url: `https://127.0.0.1:${tlsPort}`,
      labels: {},
      hop: { scheme: 'https', host: '127.0.0.1', port: tlsPort, username: 'tlsuser', password: 'tls-pass', ...hop },
    });
    const check = (e: UpstreamEndpoint) => checkEndpoint(e, { echoUrl, redactor: NO_REDACTION }, AbortSignal.timeout(10_000));
    try {
      expect(await check(endpoint({ ca: cert }))).toMatchObject({ ready: true, reason: 'Ok', details: { egressIp: '127.0.0.1' } });
      const untrusted = await check(endpoint({}));
      expect(untrusted).toMatchObject({ ready: false, reason: 'Error' });
      expect(untrusted.message).toMatch(/^TLS to the upstream proxy failed/);
      expect(await check(endpoint({ ca: cert, password: 'wrong' }))).toMatchObject({ ready: false, reason: 'Unauthorized' });
    } finally {
      await new Promise((resolve) => echo.close(resolve));
    }
  });
});
