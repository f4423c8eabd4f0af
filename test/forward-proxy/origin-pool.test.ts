/**
 * The origin pool (src/forward-proxy/origin-pool.ts) against real origins on loopback: its bounds,
 * the order waiting requests are served in, what it keeps idle, the pinned lookup every connection
 * is made with (and never made again with), and retiring.
 */
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, LookupFunction, Socket } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { OriginPool, type Lease, type OriginAddress } from '../../src/forward-proxy/origin-pool.ts';

const closers: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

interface Origin {
  port: number;
  /** Connections accepted so far, and those still open. */
  accepted: number;
  open: Set<Socket>;
  server: Server;
}

async function origin(keepAliveTimeout = 30_000, closing = false): Promise<Origin> {
  const answer = (_req: unknown, res: ServerResponse): void => {
    if (closing) res.setHeader('connection', 'close');
    res.end('ok');
  };
  const state: Origin = { port: 0, accepted: 0, open: new Set(), server: createServer(answer) };
  state.server.keepAliveTimeout = keepAliveTimeout;
  state.server.on('connection', (s: Socket) => {
    state.accepted++;
    state.open.add(s);
    s.once('close', () => state.open.delete(s));
  });
  state.server.listen(0, '127.0.0.1');
  await once(state.server, 'listening');
  state.port = (state.server.address() as AddressInfo).port;
  closers.push(() => {
    state.server.closeAllConnections();
    return new Promise((resolve) => state.server.close(resolve));
  });
  return state;
}

function pool(limits: Partial<ConstructorParameters<typeof OriginPool>[0]> = {}): OriginPool {
  const p = new OriginPool({ perDestination: 8, idlePerDestination: 8, total: 64, idleMs: 30_000, ...limits }, { connectMs: 5_000, idleMs: 5_000 });
  closers.push(() => p.destroy());
  return p;
}

/** The lease `acquire` gives (pending while the request waits), or its error; `withdraw` takes the request back. */
function lease(p: OriginPool, address: OriginAddress): Promise<Lease> & { withdraw: () => void } {
  let withdraw = (): void => undefined;
  const got = new Promise<Lease>((resolve, reject) => {
    withdraw = p.acquire(address, (l) => (l instanceof Error ? reject(l) : resolve(l)));
  });
  return Object.assign(got, { withdraw });
}

/** One GET on the lease's connection, its body read (the client module alone has no `request`: dispatch, as the proxy does). */
function get(l: Lease): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    l.client.dispatch(
      { path: '/', method: 'GET' },
      {
        onConnect: () => undefined,
        onHeaders: () => true,
        onData: (chunk) => chunks.push(chunk) > 0,
        onComplete: () => resolve(Buffer.concat(chunks).toString()),
        onError: reject,
      },
    );
  });
}

const settled = async (p: Promise<unknown>): Promise<boolean> => {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
};

/** Resolves when `socket` has closed (undici destroys a socket it closes with an error: `once` would reject). */
const closed = (socket: Socket | undefined): Promise<void> =>
  new Promise((resolve) => (socket?.destroyed ? resolve() : socket?.once('close', () => resolve())));

const to = (o: Origin): OriginAddress => ({ host: '127.0.0.1', port: o.port });

describe('origin pool', () => {
  test('past the bound per destination a request waits, and gets the next connection given back, reused, before anything new is made', async () => {
    const o = await origin();
    const p = pool({ perDestination: 2 });
    const [a, b] = await Promise.all([lease(p, to(o)), lease(p, to(o))]);
    await Promise.all([get(a), get(b)]);
    expect([a.reused, b.reused, o.accepted]).toEqual([false, false, 2]);
    const third = lease(p, to(o));
    expect(await settled(third)).toBe(false);
    p.release(b, true);
    const c = await third;
    expect(await get(c)).toBe('ok');
    expect([c.reused, c.socket(), o.accepted]).toEqual([true, b.socket(), 2]);
  });

  test('the bound over all destinations: a request to another one waits until a connection closes, then connects', async () => {
    const [o1, o2] = [await origin(), await origin()];
    const p = pool({ total: 1 });
    const a = await lease(p, to(o1));
    await get(a);
    const other = lease(p, to(o2));
    expect(await settled(other)).toBe(false);
    // Given back not reusable, o1's connection closes, and that room goes to the request for o2.
    p.release(a, false);
    const b = await other;
    expect(await get(b)).toBe('ok');
    expect([o1.accepted, o2.accepted, p.size]).toEqual([1, 1, 1]);
  });

  test('a withdrawn request is never given a connection', async () => {
    const o = await origin();
    const p = pool({ perDestination: 1 });
    const a = await lease(p, to(o));
    await get(a);
    const gone = lease(p, to(o));
    gone.withdraw();
    const next = lease(p, to(o));
    p.release(a, true);
    expect((await next).socket()).toBe(a.socket());
    expect(await settled(gone)).toBe(false);
  });

  test('keeps at most idlePerDestination idle, the most recently used first; one given back as not reusable is closed', async () => {
    const o = await origin();
    const p = pool({ idlePerDestination: 1 });
    const [a, b, c] = await Promise.all([lease(p, to(o)), lease(p, to(o)), lease(p, to(o))]);
    await Promise.all([get(a), get(b), get(c)]);
    p.release(a, true);
    p.release(b, true);
    p.release(c, false);
    await Promise.all([closed(b.socket()), closed(c.socket())]);
    const d = await lease(p, to(o));
    expect([d.reused, d.socket()]).toEqual([true, a.socket()]);
    expect(p.size).toBe(1);
  });

  test("a connection is made with the admission's lookup, and a Client whose socket closed is dropped, never connected again", async () => {
    const o = await origin(200);
    const asked: string[] = [];
    const pinned: LookupFunction = (hostname, options, done) => {
      asked.push(hostname);
      if (options.all) (done as (err: null, addresses: { address: string; family: number }[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
      else (done as (err: null, address: string, family: number) => void)(null, '127.0.0.1', 4);
    };
    const p = pool();
    const a = await lease(p, { host: 'pinned.invalid', port: o.port, lookup: pinned });
    expect(await get(a)).toBe('ok');
    expect(asked).toEqual(['pinned.invalid']);
    p.release(a, true);
    // The origin closes the idle connection after 200 ms: the pool lets it go.
    await closed(a.socket());
    await new Promise((resolve) => setImmediate(resolve));
    expect(p.size).toBe(0);
    // Its Client connects no more, even when asked directly: a new connection needs a new admission.
    await expect(get(a)).rejects.toThrow();
    expect([asked.length, o.accepted]).toEqual([1, 1]);
  });

  test('an answer that says Connection: close closes its connection, which leaves the pool; the next request connects anew', async () => {
    const o = await origin(30_000, true);
    const p = pool();
    const a = await lease(p, to(o));
    expect(await get(a)).toBe('ok');
    p.release(a, true);
    await closed(a.socket());
    await new Promise((resolve) => setImmediate(resolve));
    expect([p.size, o.open.size]).toEqual([0, 0]);
    const b = await lease(p, to(o));
    expect(await get(b)).toBe('ok');
    expect([b.reused, o.accepted]).toEqual([false, 2]);
  });

  test('retired: idle connections close now, a lent one when it comes back, and new requests get an error', async () => {
    const o = await origin();
    const p = pool();
    const [a, b] = await Promise.all([lease(p, to(o)), lease(p, to(o))]);
    await Promise.all([get(a), get(b)]);
    p.release(a, true);
    await new Promise((resolve) => setImmediate(resolve));
    p.retire();
    await closed(a.socket());
    expect(b.socket()?.destroyed).toBe(false);
    await expect(lease(p, to(o))).rejects.toMatchObject({ code: 'ECONNRESET' });
    p.release(b, true);
    await closed(b.socket());
    expect(p.size).toBe(0);
  });
});
