import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { Server as ProxyServer } from 'proxy-chain';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { egressGuards, proxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { silentLogger } from '../../src/logging.ts';
import { createLocalLifecycle } from '../../src/providers/local/lifecycle.ts';
import { echoBody, echoRoute } from '../../src/readiness/echo.ts';
import { probeProxy } from '../../src/readiness/probe.ts';
import { startPausableProxy } from '../support/pausable-proxy.ts';
import type { ProxyCredentials } from '../../src/model/proxy-credentials.ts';

const CREDS: ProxyCredentials = { username: 'probe', password: 'probe-secret' };

function startEcho(): Promise<{ server: HttpServer; url: string }> {
  const app = new Hono();
  app.route('/v1', echoRoute());
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info) => {
      resolve({ server: server, url: `http://127.0.0.1:${info.port}/v1/echo` });
    }) as HttpServer;
  });
}

function close(server: HttpServer): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** A port nothing listens on: opened and closed again. */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

let proxy: ProxyServer;
let echo: { server: HttpServer; url: string };

beforeAll(async () => {
  proxy = new ProxyServer({
    host: '127.0.0.1',
    port: 0,
    prepareRequestFunction: ({ username, password }) => ({ requestAuthentication: username !== CREDS.username || password !== CREDS.password }),
  });
  await proxy.listen();
  echo = await startEcho();
});

afterAll(async () => {
  await proxy.close(true);
  await close(echo.server);
});

const endpoint = (): { host: string; port: number } => ({ host: '127.0.0.1', port: proxy.port });

describe('the echo', () => {
  it('ends each connection after its answer, so proxies keep no idle connection to the API for it', async () => {
    const echo = await startEcho();
    try {
      const res = await fetch(echo.url);
      expect(res.headers.get('connection')).toBe('close');
      expect(await res.json()).toEqual({ address: '127.0.0.1' });
    } finally {
      await close(echo.server);
    }
  });
});

describe('probeProxy', () => {
  it('succeeds through a proxy with the right credentials and records the egress IP', async () => {
    const result = await probeProxy({ endpoint: endpoint(), credentials: CREDS, echoUrl: echo.url, signal: AbortSignal.timeout(10_000) });
    expect(result).toMatchObject({ ok: true, egressIp: '127.0.0.1' });
    expect(result.durationSeconds).toBeGreaterThan(0);
  });

  it('reports proxy-auth when the proxy refuses the credentials', async () => {
    const result = await probeProxy({
      endpoint: endpoint(),
      credentials: { username: 'probe', password: 'wrong' },
      echoUrl: echo.url,
      signal: AbortSignal.timeout(10_000),
    });
    expect(result).toMatchObject({ ok: false, stage: 'proxy-auth' });
    expect(JSON.stringify(result)).not.toContain('wrong');
  });

  it('reports tcp when nothing listens on the proxy port', async () => {
    const port = await closedPort();
    const result = await probeProxy({ endpoint: { host: '127.0.0.1', port }, credentials: CREDS, echoUrl: echo.url, signal: AbortSignal.timeout(10_000) });
    expect(result).toMatchObject({ ok: false, stage: 'tcp', cause: 'refused' });
    if (!result.ok) expect(result.message).toContain(`127.0.0.1:${port}`);
  });

  it('fails with cause timeout when a paused proxy holds the request past the step deadline, not at the caller deadline', async () => {
    const paused = await startPausableProxy(CREDS);
    paused.pause();
    try {
      const held = once(paused, 'held');
      const result = await probeProxy({
        endpoint: { host: '127.0.0.1', port: paused.port },
        credentials: CREDS,
        echoUrl: echo.url,
        stepTimeoutMs: 300,
        signal: AbortSignal.timeout(30_000),
      });
      await held;
      expect(result).toMatchObject({ ok: false, stage: 'http', cause: 'timeout' });
      if (!result.ok) expect(result.message).toContain('no answer within 300 ms');
      paused.resume();
      // Resumed, the same proxy passes: with a step deadline no loaded machine reaches (a 300 ms one
      // would make this pass depend on the clock).
      expect(
        await probeProxy({
          endpoint: { host: '127.0.0.1', port: paused.port },
          credentials: CREDS,
          echoUrl: echo.url,
          stepTimeoutMs: 30_000,
          signal: AbortSignal.timeout(30_000),
        }),
      ).toMatchObject({ ok: true });
    } finally {
      await paused.close();
    }
  });

  it('reports http when the echo server is down behind a working proxy', async () => {
    const down = await startEcho();
    await close(down.server);
    const result = await probeProxy({ endpoint: endpoint(), credentials: CREDS, echoUrl: down.url, signal: AbortSignal.timeout(10_000) });
    expect(result).toMatchObject({ ok: false, stage: 'http' });
    if (!result.ok) expect(result.message).toContain(down.url);
  });

  it('reports http when the echo URL answers something other than an address', async () => {
    const url = new URL(echo.url);
    url.pathname = '/v1/not-echo';
    const result = await probeProxy({ endpoint: endpoint(), credentials: CREDS, echoUrl: url.href, signal: AbortSignal.timeout(10_000) });
    expect(result).toMatchObject({ ok: false, stage: 'http' });
    if (!result.ok) expect(result.message).toContain('404');
  });

  it('sends the echo token when the echo endpoint requires one', async () => {
    const app = new Hono();
    app.use('*', async (c, next) => (c.req.header('authorization') === 'Bearer echo-token' ? next() : c.json({ error: 'Unauthorized' }, 401)));
    app.route('/v1', echoRoute());
    const guarded = await new Promise<{ server: HttpServer; url: string }>((resolve) => {
      const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info) =>
        resolve({ server: server, url: `http://127.0.0.1:${info.port}/v1/echo` }),
      ) as HttpServer;
    });
    try {
      const without = await probeProxy({ endpoint: endpoint(), credentials: CREDS, echoUrl: guarded.url, signal: AbortSignal.timeout(10_000) });
      expect(without).toMatchObject({ ok: false, stage: 'http' });
      if (!without.ok) expect(without.message).toContain('401');
      const withToken = await probeProxy({
        endpoint: endpoint(),
        credentials: CREDS,
        echoUrl: guarded.url,
        echoToken: 'echo-token',
        signal: AbortSignal.timeout(10_000),
      });
      expect(withToken).toMatchObject({ ok: true, egressIp: '127.0.0.1' });
    } finally {
      await close(guarded.server);
    }
  });

  it('rejects with the signal reason when aborted instead of blaming a stage', async () => {
    const controller = new AbortController();
    const reason = new Error('probe deadline');
    controller.abort(reason);
    await expect(probeProxy({ endpoint: endpoint(), credentials: CREDS, echoUrl: echo.url, signal: controller.signal })).rejects.toBe(reason);
  });

  it('rejects when aborted while the echo request hangs', async () => {
    const app = new Hono();
    let release!: () => void;
    const hung = new Promise<void>((resolve) => (release = resolve));
    app.get('/v1/echo', async (c) => {
      await hung;
      return c.json({ address: '127.0.0.1' });
    });
    const slow = await new Promise<{ server: HttpServer; url: string }>((resolve) => {
      const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info) =>
        resolve({ server: server, url: `http://127.0.0.1:${info.port}/v1/echo` }),
      ) as HttpServer;
    });
    const controller = new AbortController();
    const reason = new Error('probe deadline');
    slow.server.once('request', () => controller.abort(reason));
    try {
      await expect(probeProxy({ endpoint: endpoint(), credentials: CREDS, echoUrl: slow.url, signal: controller.signal })).rejects.toBe(reason);
    } finally {
      release();
      await close(slow.server);
    }
  });
});

describe('echo', () => {
  it('answers the caller address, IPv4-mapped addresses as plain IPv4', async () => {
    const res = await fetch(echo.url);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ address: '127.0.0.1' });
    expect(echoBody('::ffff:10.1.2.3')).toEqual({ address: '10.1.2.3' });
    expect(echoBody('2001:db8::1')).toEqual({ address: '2001:db8::1' });
  });
});

describe('probeProxy against a local provider instance', () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'egress-probe-'));
  });
  afterEach(async () => {
    await createLocalLifecycle({ dataDir, logger: silentLogger() }).deleteInstance(
      'probe-1',
      undefined,
      { owner: { fleet: 'f', proxy: 'p' }, nameIsOurs: true },
      AbortSignal.timeout(20_000),
    );
    await rm(dataDir, { recursive: true, force: true });
  });

  it('is ok with the instance credentials and proxy-auth without them', async () => {
    // The echo is on loopback: the proxy lets exactly its GET through (the echo exception of the egress policy).
    const egressPolicy = proxyEgressPolicy(undefined, egressGuards({ redisUrl: 'redis://127.0.0.1:1', echoUrl: echo.url }));
    const lifecycle = createLocalLifecycle({ dataDir, logger: silentLogger(), egressPolicy });
    const instance = await lifecycle.ensureInstance({ name: 'probe-1', owner: { fleet: 'f', proxy: 'p' }, credentials: CREDS }, AbortSignal.timeout(20_000));
    const good = await probeProxy({ endpoint: instance.endpoint!, credentials: CREDS, echoUrl: echo.url, signal: AbortSignal.timeout(10_000) });
    expect(good).toMatchObject({ ok: true, egressIp: '127.0.0.1' });
    const bad = await probeProxy({
      endpoint: instance.endpoint!,
      credentials: { ...CREDS, password: 'x' },
      echoUrl: echo.url,
      signal: AbortSignal.timeout(10_000),
    });
    expect(bad).toMatchObject({ ok: false, stage: 'proxy-auth' });
  });
});
