import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import type { ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { afterEach, describe, expect, test } from 'vitest';
import { effectiveLimits, type ConnectionLimits, type RefusalReason } from '../../src/http/connection-limits.ts';
import { listenHttp } from '../../src/http/listen.ts';
import { silentLogger } from '../../src/logging.ts';
import { rawRequest } from '../support/raw-http.ts';

/**
 * The connection caps of an HTTP listener (src/http/connection-limits.ts) on a real server and
 * real sockets: the general share, a peer's share, the reserve that answers only the health
 * paths, refusal at accept past the cap, and idle sockets closed after the header timeout.
 */

const LIMITS: ConnectionLimits = {
  maxConnections: 12,
  reserved: 4,
  perPeer: 4,
  headersTimeoutMs: 1000,
  requestTimeoutMs: 2000,
  keepAliveTimeoutMs: 1000,
  reserveIdleMs: 60_000,
};

/**
 * The same caps with timeouts no test reaches, for the tests that hold idle sockets: under LIMITS'
 * 1 s header timeout their sockets would be closed under them on a slow machine.
 */
const HOLDING: ConnectionLimits = { ...LIMITS, headersTimeoutMs: 120_000, requestTimeoutMs: 240_000, keepAliveTimeoutMs: 120_000 };

interface Idle {
  socket: Socket;
  closed: Promise<void>;
}

function idle(port: number, localAddress: string): Promise<Idle> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress });
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    // Reading, so that the server's FIN is seen (a socket nobody reads may never emit 'end').
    socket.resume();
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('error', reject);
  });
}

describe('connection caps', () => {
  let server: ServerType | undefined;
  const open: Socket[] = [];
  afterEach(async () => {
    for (const s of open.splice(0)) s.destroy();
    if (server) {
      const s = server;
      await new Promise<void>((r) => {
        s.close(() => r());
        if ('closeAllConnections' in s) s.closeAllConnections();
      });
    }
    server = undefined;
  });

  async function start(limits: ConnectionLimits, refused: RefusalReason[] = []): Promise<string> {
    const app = new Hono();
    app.get('/healthz', (c) => c.text('ok'));
    app.get('/work', (c) => c.text('done'));
    server = await listenHttp(app.fetch, {
      hostname: '127.0.0.1',
      port: 0,
      portFlag: '--port',
      logger: silentLogger(),
      name: 'api',
      limits,
      reservedPaths: ['/healthz'],
      onRefused: (r) => refused.push(r),
    });
    return String((server.address() as AddressInfo).port);
  }

  async function hold(port: number, count: number, from: string): Promise<Idle[]> {
    const held: Idle[] = [];
    for (let i = 0; i < count; i++) {
      const s = await idle(port, from);
      open.push(s.socket);
      held.push(s);
    }
    return held;
  }

  test('an idle connection that sends nothing is closed after the header timeout, freeing its place', async () => {
    const port = Number(await start(LIMITS));
    // A peer's whole share, idle: each closed by the server once its header timeout passes.
    const held = await hold(port, LIMITS.perPeer, '127.0.0.2');
    await Promise.all(held.map((h) => h.closed));
    expect(held.every((h) => h.socket.destroyed)).toBe(true);
    // Their places are free again: the peer is served in full, not sent to the health-only reserve.
    expect(await rawRequest(`http://127.0.0.1:${port}/work`, { headers: { connection: 'close' }, localAddress: '127.0.0.2' })).toMatchObject({
      status: 200,
      text: 'done',
    });
  });

  test('one peer gets its share; others are still served in full', async () => {
    const port = Number(await start(HOLDING));
    await hold(port, LIMITS.perPeer, '127.0.0.2');
    // Its next connection lands in the reserve: health only.
    expect((await rawRequest(`http://127.0.0.1:${port}/work`, { headers: { connection: 'close' }, localAddress: '127.0.0.2' })).status).toBe(503);
    expect((await rawRequest(`http://127.0.0.1:${port}/healthz`, { headers: { connection: 'close' }, localAddress: '127.0.0.2' })).status).toBe(200);
    // Another peer is served everything.
    expect(await rawRequest(`http://127.0.0.1:${port}/work`, { headers: { connection: 'close' } })).toMatchObject({ status: 200, text: 'done' });
  });

  test('with the general share full, a new connection is answered only for the reserved paths, and then closed', async () => {
    const refused: RefusalReason[] = [];
    const port = Number(await start(HOLDING, refused));
    const general = LIMITS.maxConnections - LIMITS.reserved;
    for (let peer = 2; peer < 2 + general / LIMITS.perPeer; peer++) await hold(port, LIMITS.perPeer, `127.0.0.${peer}`);
    const busy = await rawRequest(`http://127.0.0.1:${port}/work`);
    expect(busy.status).toBe(503);
    expect(busy.headers.connection).toBe('close');
    expect(busy.headers['retry-after']).toBe('1');
    const health = await rawRequest(`http://127.0.0.1:${port}/healthz`);
    expect(health).toMatchObject({ status: 200, text: 'ok' });
    expect(health.headers.connection).toBe('close');
    expect(refused).toContain('reserved-only');
  });

  test('past the cap, reserve included, a new connection is closed as it is accepted', async () => {
    const refused: RefusalReason[] = [];
    const port = Number(await start(HOLDING, refused));
    for (let peer = 2; peer < 2 + LIMITS.maxConnections / LIMITS.perPeer; peer++) await hold(port, LIMITS.perPeer, `127.0.0.${peer}`);
    const extra = await idle(port, '127.0.0.1');
    open.push(extra.socket);
    await extra.closed;
    expect(refused).toContain('over-capacity');
  });

  test('the caps follow the open-files limit: at most the given share, a sixteenth reserved, a peer at most half the rest', () => {
    expect(effectiveLimits({ maxConnections: 1024, perPeer: 256 }, 20_000, 0.5)).toMatchObject({ maxConnections: 1024, reserved: 64, perPeer: 256 });
    expect(effectiveLimits({ maxConnections: 1024, perPeer: 256 }, 256, 0.5)).toMatchObject({ maxConnections: 128, reserved: 8, perPeer: 60 });
    expect(effectiveLimits({ maxConnections: 1024, perPeer: 256 }, undefined, 0.5)).toMatchObject({ maxConnections: 1024 });
    expect(effectiveLimits({ maxConnections: 1024, perPeer: 256 }, 20_000, 0.5)).toMatchObject({ headersTimeoutMs: 10_000, keepAliveTimeoutMs: 5_000 });
  });
});
