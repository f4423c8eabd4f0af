/**
 * SSRF: a client holding a proxy's credentials must not reach the inside through it. Real local
 * proxies, built and started the way the local provider starts them; every target here is either
 * a loopback listener of this test (whose connections are counted, to prove a refused request
 * never connected) or a non-loopback address that is refused before any connection is attempted
 * (no traffic leaves the machine: those ranges are never allowed here).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { egressGuards, type EgressPolicyConfig } from '../../src/egress/policy-config.ts';
import { connectThroughHop } from '../../src/forward-proxy/chain-connect.ts';
import { silentLogger } from '../../src/logging.ts';
import { createLocalProvider } from '../../src/providers/local/index.ts';
import { asInstance, INSTANCE_FILE, readJson } from '../../src/providers/local/instance-files.ts';
import { findHostProcesses } from '../../src/providers/local/process-table.ts';
import { buildProxyProgram } from '../../src/providers/local/proxy-program.ts';
import { freePort } from '../../src/redis/redis-server.ts';
import type { Provider } from '../../src/providers/types.ts';
import { waitFor } from '../support/wait.ts';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';

const CREDS: ProxyCredentials = { username: 'crawler', password: 'ssrf-test-pass' };
const AUTH = `Basic ${Buffer.from(`${CREDS.username}:${CREDS.password}`).toString('base64')}`;
const signal = (): AbortSignal => AbortSignal.timeout(30_000);

interface Answer {
  status: number;
  body: string;
}

/** Sends one raw request to the proxy (so every host spelling reaches it as written) and reads the answer until the proxy closes. */
function raw(proxyPort: number, head: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: proxyPort });
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      data += chunk;
      // A CONNECT that succeeded stays open: its head is the whole answer.
      if (/^HTTP\/1\.1 200 Connection Established\r\n\r\n/.test(data)) socket.destroy();
    });
    socket.on('close', () => {
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(data)?.[1] ?? 0);
      resolve({ status, body: data.split('\r\n\r\n').slice(1).join('\r\n\r\n') });
    });
    socket.on('error', reject);
    socket.write(head);
  });
}

function get(proxyPort: number, url: string, method = 'GET'): Promise<Answer> {
  const host = new URL(url).host;
  return raw(proxyPort, `${method} ${url} HTTP/1.1\r\nHost: ${host}\r\nProxy-Authorization: ${AUTH}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
}

function tunnel(proxyPort: number, hostPort: string): Promise<Answer> {
  return raw(proxyPort, `CONNECT ${hostPort} HTTP/1.1\r\nHost: ${hostPort}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
}

/** CONNECT, then a GET inside the tunnel; the tunnelled answer. */
function getInTunnel(proxyPort: number, hostPort: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: proxyPort,
      method: 'CONNECT',
      path: hostPort,
      agent: false,
      headers: { host: hostPort, 'proxy-authorization': AUTH },
    });
    req.on('connect', (res: IncomingMessage, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        resolve({ status: res.statusCode ?? 0, body: '' });
        return;
      }
      let data = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (data += chunk));
      socket.on('end', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0), body: data.split('\r\n\r\n').slice(1).join('') }));
      socket.on('error', reject);
      socket.write(`GET /in-tunnel HTTP/1.1\r\nHost: ${hostPort}\r\nConnection: close\r\n\r\n`);
    });
    req.on('error', reject);
    req.end();
  });
}

/** A loopback HTTP server that counts the connections it accepts. */
async function countingServer(
  handler: (path: string, res: ServerResponse, remote: string) => void,
): Promise<{ server: Server; port: number; connections: () => number; paths: string[] }> {
  let connections = 0;
  const paths: string[] = [];
  const server = createServer((req, res) => {
    paths.push(req.url ?? '');
    handler(req.url ?? '', res, req.socket.remoteAddress ?? '');
  });
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, connections: () => connections, paths };
}

let origin: Awaited<ReturnType<typeof countingServer>>;
let api: Awaited<ReturnType<typeof countingServer>>;
let redisHostPort: string;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  origin = await countingServer((path, res) => res.end(`origin ${path}`));
  // Plays the orchestrator's API: the echo, and a route that would hand out every proxy's credentials.
  api = await countingServer((path, res, remote) => {
    if (path === '/v1/echo') res.end(JSON.stringify({ address: remote }));
    else res.end('http://egress-other:SECRET@127.0.0.1:1\n');
  });
  const redis = new URL(inject('redisUrl'));
  redisHostPort = `${redis.hostname}:${redis.port}`;
});

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await new Promise<void>((r) => origin.server.close(() => r()));
  await new Promise<void>((r) => api.server.close(() => r()));
});

/** A local provider guarding this test's "API" and the test Redis, as runRoles builds it, with one running proxy. */
async function proxyWith(
  name: string,
  egressPolicy: EgressPolicyConfig | undefined,
  registry = new Registry(),
): Promise<{ provider: Provider; port: number; registry: Registry; dataDir: string }> {
  const dataDir = await mkdtemp(join(tmpdir(), `egress-ssrf-${name}-`));
  const egress = egressGuards({ redisUrl: inject('redisUrl'), api: { host: '127.0.0.1', port: api.port }, echoUrl: `http://127.0.0.1:${api.port}/v1/echo` });
  const provider = createLocalProvider(
    { name, type: 'local', dataDir, ...(egressPolicy ? { proxies: { egressPolicy } } : {}) },
    { logger: silentLogger(), registry, dataDir, egress },
  );
  const instance = await provider.lifecycle!.ensureInstance({ name: `ep-${name}`, owner: { fleet: 'ssrf', proxy: name }, credentials: CREDS }, signal());
  cleanups.push(async () => {
    await provider.lifecycle!.deleteInstance(`ep-${name}`, undefined, { owner: { fleet: 'ssrf', proxy: name }, nameIsOurs: true }, signal());
    await provider.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  return { provider, port: instance.endpoint!.port, registry, dataDir };
}

describe('a proxy with the default policy', () => {
  let proxy: Awaited<ReturnType<typeof proxyWith>>;
  beforeAll(async () => {
    proxy = await proxyWith('ssrf-default', undefined);
  });

  // Loopback spellings aim at the counting origin: a refused request must leave its count unchanged.
  const loopback: Array<[string, string]> = [
    ['127.0.0.1', 'loopback'],
    ['127.1', 'loopback'],
    ['2130706433', 'loopback'],
    ['0x7f000001', 'loopback'],
    ['0177.0.0.1', 'loopback'],
    ['[::1]', 'loopback'],
    ['[::ffff:127.0.0.1]', 'loopback'],
    ['[::ffff:7f00:1]', 'loopback'],
    ['[::127.0.0.1]', 'loopback'],
    ['[64:ff9b::7f00:1]', 'loopback'],
    ['[2002:7f00:1::]', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['localhost', 'loopback'],
  ];
  // Non-loopback ranges: refused before any connection (there is no route to most of them here; the
  // 403 with its reason is the proof that nothing was attempted).
  const inside: Array<[string, string]> = [
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'metadata'],
    ['169.254.1.1', 'link-local'],
    ['100.64.0.1', 'cgnat'],
    ['100.100.100.200', 'metadata'],
    ['[fd00:ec2::254]', 'metadata'],
    ['[fd12::1]', 'unique-local'],
    ['[fe80::1]', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['[ff02::1]', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['[::ffff:10.0.0.1]', 'private'],
  ];

  it.each(loopback)('refuses %s (plain HTTP and CONNECT) without connecting: %s', async (host, reason) => {
    const before = origin.connections();
    const http = await get(proxy.port, `http://${host}:${origin.port}/secret`);
    expect(http).toEqual({ status: 403, body: `Forbidden by egress policy: ${reason}\n` });
    const connect = await tunnel(proxy.port, `${host}:${origin.port}`);
    expect(connect).toEqual({ status: 403, body: `Forbidden by egress policy: ${reason}\n` });
    expect(origin.connections()).toBe(before);
  });

  it.each(loopback)('refuses %s over SOCKS5 too, without connecting (same credentials, same policy)', async (host) => {
    const before = origin.connections();
    const hop = { scheme: 'socks5' as const, host: '127.0.0.1', port: proxy.port, ...CREDS };
    const target = host.startsWith('[') ? host.slice(1, -1) : host;
    await expect(connectThroughHop(hop, target, origin.port, { timeoutMs: 10_000 })).rejects.toMatchObject({ code: 'EPROXYREFUSED' });
    expect(origin.connections()).toBe(before);
  });

  it.each(inside)('refuses %s (plain HTTP and CONNECT): %s', async (host, reason) => {
    expect(await get(proxy.port, `http://${host}/latest/meta-data/`)).toEqual({ status: 403, body: `Forbidden by egress policy: ${reason}\n` });
    expect(await tunnel(proxy.port, `${host}:443`)).toEqual({ status: 403, body: `Forbidden by egress policy: ${reason}\n` });
  });

  it('lets the readiness echo through (a GET of exactly its path) and nothing else on the API port', async () => {
    const before = api.connections();
    const echo = await get(proxy.port, `http://127.0.0.1:${api.port}/v1/echo`);
    expect(echo.status).toBe(200);
    expect(JSON.parse(echo.body)).toEqual({ address: '127.0.0.1' });
    const refused = [
      await get(proxy.port, `http://127.0.0.1:${api.port}/v1/proxies?format=text`),
      await get(proxy.port, `http://127.0.0.1:${api.port}/v1/echo`, 'POST'),
      await get(proxy.port, `http://127.0.0.1:${api.port}/v1/echo?x=1`),
      await get(proxy.port, `http://127.0.0.1:${api.port}/v1/echo/`),
      await tunnel(proxy.port, `127.0.0.1:${api.port}`),
    ];
    for (const answer of refused) expect(answer).toEqual({ status: 403, body: 'Forbidden by egress policy: guarded-listener\n' });
    expect(api.connections()).toBe(before + 1);
  });

  it("never lets a request hidden in the echo GET's chunked body reach the API: it arrives as the body, not as a request", async () => {
    // The echo GET is the one request the policy lets reach the API; a second request smuggled in
    // its body (unframed upstream, it would be read as one) would reach the credentials route.
    const hidden = `GET /v1/proxies?format=text HTTP/1.1\r\nHost: 127.0.0.1:${api.port}\r\n\r\n`;
    const body = `${Buffer.byteLength(hidden).toString(16)}\r\n${hidden}\r\n0\r\n\r\n`;
    const seen = api.paths.length;
    const answer = await raw(
      proxy.port,
      `GET http://127.0.0.1:${api.port}/v1/echo HTTP/1.1\r\nHost: 127.0.0.1:${api.port}\r\nProxy-Authorization: ${AUTH}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(answer.status).toBe(200);
    expect(answer.body).not.toContain('SECRET');
    expect(api.paths.slice(seen)).toEqual(['/v1/echo']);
  });
});

describe('the denied counter', () => {
  it('counts refusals by reason in proxy_operator_proxy_denied_total{provider,reason}, and never goes down when a proxy restarts', async () => {
    const proxy = await proxyWith('ssrf-metric', undefined);
    const value = async (reason: string): Promise<number> => {
      const metric = await proxy.registry.getSingleMetric('proxy_operator_proxy_denied_total')!.get();
      return metric.values.find((v) => v.labels.provider === 'ssrf-metric' && v.labels.reason === reason)?.value ?? 0;
    };
    expect(await value('metadata')).toBe(0);
    expect(await tunnel(proxy.port, '169.254.169.254:80')).toMatchObject({ status: 403 });
    expect(await get(proxy.port, 'http://169.254.169.254/computeMetadata/v1/')).toMatchObject({ status: 403 });
    expect(await get(proxy.port, `http://127.0.0.1:${api.port}/v1/proxies`)).toMatchObject({ status: 403 });
    await waitFor('two metadata denials counted', async () => (await value('metadata')) === 2);
    await waitFor('one guarded-listener denial counted', async () => (await value('guarded-listener')) === 1);
    expect(await proxy.registry.metrics()).toContain('proxy_operator_proxy_denied_total{provider="ssrf-metric",reason="metadata"} 2');

    // The proxy host dies and is started again: its own counts start over, the exported counter does not.
    const [pid] = await findHostProcesses(proxy.dataDir);
    process.kill(pid!, 'SIGKILL');
    await waitFor('the proxy host gone', async () => !(await findHostProcesses(proxy.dataDir)).includes(pid!));
    const again = await proxy.provider.lifecycle!.ensureInstance(
      { name: 'ep-ssrf-metric', owner: { fleet: 'ssrf', proxy: 'ssrf-metric' }, credentials: CREDS },
      signal(),
    );
    expect(await tunnel(again.endpoint!.port, '[fd00:ec2::254]:80')).toMatchObject({ status: 403 });
    await waitFor('a third metadata denial counted', async () => (await value('metadata')) === 3);
    expect(await value('guarded-listener')).toBe(1);
  });
});

describe('a proxy whose policy allows loopback', () => {
  let proxy: Awaited<ReturnType<typeof proxyWith>>;
  beforeAll(async () => {
    proxy = await proxyWith('ssrf-allow', { allow: ['127.0.0.0/8', '::1/128'], deny: ['127.0.0.3/32'] });
  });

  it('reaches a loopback origin (plain HTTP and CONNECT)', async () => {
    const before = origin.connections();
    expect(await get(proxy.port, `http://127.0.0.1:${origin.port}/hello`)).toMatchObject({ status: 200, body: 'origin /hello' });
    expect(await getInTunnel(proxy.port, `127.0.0.1:${origin.port}`)).toMatchObject({ status: 200, body: 'origin /in-tunnel' });
    expect(await get(proxy.port, `http://localhost:${origin.port}/by-name`)).toMatchObject({ status: 200, body: 'origin /by-name' });
    expect(origin.connections()).toBe(before + 3);
  });

  it('still refuses the API port by any spelling, Redis, and its own listener', async () => {
    const before = api.connections();
    for (const host of ['127.0.0.1', 'localhost', '[::ffff:127.0.0.1]', '127.0.0.2', '0.0.0.0', '[::1]']) {
      expect(await get(proxy.port, `http://${host}:${api.port}/v1/proxies?format=text`)).toEqual({
        status: 403,
        body: 'Forbidden by egress policy: guarded-listener\n',
      });
      expect(await tunnel(proxy.port, `${host}:${api.port}`)).toEqual({ status: 403, body: 'Forbidden by egress policy: guarded-listener\n' });
    }
    expect(await tunnel(proxy.port, redisHostPort)).toEqual({ status: 403, body: 'Forbidden by egress policy: guarded-listener\n' });
    // Nor itself (a loop through its own listener).
    expect(await tunnel(proxy.port, `127.0.0.1:${proxy.port}`)).toEqual({ status: 403, body: 'Forbidden by egress policy: guarded-listener\n' });
    expect(await get(proxy.port, `http://${redisHostPort}/`)).toEqual({ status: 403, body: 'Forbidden by egress policy: guarded-listener\n' });
    expect(api.connections()).toBe(before);
  });

  it('answers pipelined requests in order: an allowed one, then a denied one, both arrive', async () => {
    const before = origin.connections();
    const first = `GET http://127.0.0.1:${origin.port}/first HTTP/1.1\r\nHost: 127.0.0.1:${origin.port}\r\nProxy-Authorization: ${AUTH}\r\n\r\n`;
    const second = `GET http://127.0.0.3:${origin.port}/second HTTP/1.1\r\nHost: 127.0.0.3:${origin.port}\r\nProxy-Authorization: ${AUTH}\r\nConnection: close\r\n\r\n`;
    const answer = await raw(proxy.port, first + second);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatch(/^origin \/first\r?\n?HTTP\/1\.1 403 Forbidden\r\n[\s\S]*\r\n\r\nForbidden by egress policy: denied-range\n$/);
    // At most the allowed one connected (the proxy may reuse a kept-alive upstream socket); the denied one never did.
    expect(origin.connections()).toBeLessThanOrEqual(before + 1);
  });

  it('lets deny win over allow', async () => {
    const before = origin.connections();
    expect(await get(proxy.port, `http://127.0.0.3:${origin.port}/`)).toEqual({ status: 403, body: 'Forbidden by egress policy: denied-range\n' });
    expect(origin.connections()).toBe(before);
  });
});

describe('policy changes and sources', () => {
  it('a running proxy adopted by a new worker picks up the new policy without a restart', async () => {
    const first = await proxyWith('ssrf-reload', { allow: ['127.0.0.1/32'], deny: [] });
    expect(await get(first.port, `http://127.0.0.1:${origin.port}/before`)).toMatchObject({ status: 200 });
    const pids = await findHostProcesses(first.dataDir);
    expect(pids).toHaveLength(1);
    // A later worker run: same data directory, another policy (here: loopback no longer allowed).
    const later = createLocalProvider(
      { name: 'ssrf-reload', type: 'local', dataDir: first.dataDir },
      { logger: silentLogger(), registry: new Registry(), dataDir: first.dataDir },
    );
    const adopted = await later.lifecycle!.ensureInstance(
      { name: 'ep-ssrf-reload', owner: { fleet: 'ssrf', proxy: 'ssrf-reload' }, credentials: CREDS },
      signal(),
    );
    expect(adopted.endpoint?.port).toBe(first.port);
    // Adopted, not restarted: the same proxy host serves it.
    expect(await findHostProcesses(first.dataDir)).toEqual(pids);
    // The host and its relays each take the new policy up: wait until a run of requests (spread
    // over them by the kernel) is refused throughout; no refused request may have reached the origin.
    const refused: string[] = [];
    let n = 0;
    await waitFor('the proxy to refuse loopback in every process', async () => {
      for (let i = 0; i < 8; i++) {
        const path = `/after-${n++}`;
        if ((await get(first.port, `http://127.0.0.1:${origin.port}${path}`)).status !== 403) return false;
        refused.push(path);
      }
      return true;
    });
    expect(refused.length).toBeGreaterThanOrEqual(8);
    expect(origin.paths.filter((p) => refused.includes(p))).toEqual([]);
    await later.close();
  });

  describe('the program run by hand', () => {
    let dir: string;
    let program: string;
    const children: ChildProcess[] = [];

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'egress-ssrf-program-'));
      program = await buildProxyProgram(dir);
    });

    afterAll(async () => {
      for (const child of children) {
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise((r) => child.once('exit', r));
          child.kill('SIGTERM');
          await exited;
        }
      }
      await rm(dir, { recursive: true, force: true });
    });

    /** Starts the proxy program for a fresh instance directory; resolves with its port once it listens. */
    async function start(name: string, args: string[], env: Record<string, string>): Promise<number> {
      const instance = join(dir, 'instances', name);
      await mkdir(instance, { recursive: true });
      await writeFile(join(instance, 'intent.json'), JSON.stringify({ name, owner: { fleet: 'ssrf', proxy: name }, createdAt: new Date().toISOString() }));
      await writeFile(join(instance, 'credentials.json'), JSON.stringify(CREDS));
      const child = spawn(process.execPath, [program, instance, ...args], { stdio: 'ignore', env: { PATH: process.env.PATH ?? '', ...env } });
      children.push(child);
      const record = await waitFor('the proxy to listen', async () => asInstance(await readJson(join(instance, INSTANCE_FILE))));
      return record.port;
    }

    const allowLoopback = JSON.stringify({ version: 1, allow: ['127.0.0.1/32'], deny: [], guarded: [] });

    it('takes the policy from EGRESS_PROXY_POLICY', async () => {
      const port = await start('from-env', [], { EGRESS_PROXY_POLICY: allowLoopback });
      expect(await get(port, `http://127.0.0.1:${origin.port}/env`)).toMatchObject({ status: 200, body: 'origin /env' });
    });

    it('lets a given file win over the environment, and fails closed on an unreadable or malformed one', async () => {
      await writeFile(join(dir, 'bad.json'), '{"version": 1, "allow": ["not a range"]}');
      for (const file of [join(dir, 'bad.json'), join(dir, 'missing.json')]) {
        const port = await start(`file-${file.endsWith('bad.json') ? 'bad' : 'missing'}`, ['--policy', file], { EGRESS_PROXY_POLICY: allowLoopback });
        const before = origin.connections();
        expect(await get(port, `http://127.0.0.1:${origin.port}/closed`)).toEqual({ status: 403, body: 'Forbidden by egress policy: loopback\n' });
        expect(await tunnel(port, `10.0.0.1:443`)).toEqual({ status: 403, body: 'Forbidden by egress policy: private\n' });
        expect(origin.connections()).toBe(before);
      }
    });

    /** Starts the program in container mode (`--env`, as Dockerfile.proxy runs it) on a free loopback port; resolves once it accepts connections. */
    async function startContainer(env: Record<string, string>): Promise<number> {
      const port = await freePort();
      const child = spawn(process.execPath, [program, '--env'], {
        stdio: 'ignore',
        env: {
          PATH: process.env.PATH ?? '',
          PROXY_HOST: '127.0.0.1',
          PROXY_PORT: String(port),
          PROXY_USER: CREDS.username,
          PROXY_PASSWORD: CREDS.password,
          ...env,
        },
      });
      children.push(child);
      await waitFor(
        'the container-mode proxy to listen',
        () =>
          new Promise<boolean>((resolve) => {
            const socket = connect(port, '127.0.0.1', () => {
              socket.destroy();
              resolve(true);
            });
            socket.once('error', () => resolve(false));
          }),
      );
      return port;
    }

    it('in container mode (--env) enforces the same policy: fails closed without one, refuses guarded listeners and its own port even with loopback allowed', async () => {
      const bare = await startContainer({});
      const before = origin.connections();
      expect(await get(bare, `http://127.0.0.1:${origin.port}/container`)).toEqual({ status: 403, body: 'Forbidden by egress policy: loopback\n' });
      expect(await tunnel(bare, '169.254.169.254:80')).toEqual({ status: 403, body: 'Forbidden by egress policy: metadata\n' });
      expect(origin.connections()).toBe(before);

      const policy = JSON.stringify({ version: 1, allow: ['127.0.0.0/8'], deny: [], guarded: [{ host: '127.0.0.1', port: api.port, role: 'api' }] });
      const open = await startContainer({ EGRESS_PROXY_POLICY: policy });
      expect(await get(open, `http://127.0.0.1:${origin.port}/container`)).toMatchObject({ status: 200, body: 'origin /container' });
      const apiBefore = api.connections();
      expect(await get(open, `http://localhost:${api.port}/v1/proxies?format=text`)).toEqual({
        status: 403,
        body: 'Forbidden by egress policy: guarded-listener\n',
      });
      expect(await tunnel(open, `127.0.0.1:${open}`)).toEqual({ status: 403, body: 'Forbidden by egress policy: guarded-listener\n' });
      expect(api.connections()).toBe(apiBefore);
    });

    it('with no policy at all refuses the inside', async () => {
      const port = await start('none', [], {});
      const before = origin.connections();
      expect(await get(port, `http://localhost:${origin.port}/none`)).toEqual({ status: 403, body: 'Forbidden by egress policy: loopback\n' });
      expect(await tunnel(port, `[fd00:ec2::254]:80`)).toEqual({ status: 403, body: 'Forbidden by egress policy: metadata\n' });
      expect(origin.connections()).toBe(before);
    });
  });
});
