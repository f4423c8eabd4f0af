/**
 * The keep-alive connections plain-HTTP requests go out on when they go straight to the
 * destination: undici's HTTP/1.1 client, one `Client` per connection, pooled here rather than in
 * undici's `Pool` so that the proxy keeps what node's Agent gave it:
 * - every connection is made with the lookup its first request was admitted with (the policy's
 *   pinned resolution) and from the proxy's source address, and is never made again: a `Client`
 *   whose socket closed leaves the pool, and a second connect of the same `Client` is refused;
 * - each request knows its connection's socket, so accounting counts the bytes it really carried;
 * - the same bounds: connections per destination and in all, idle ones per destination, an idle
 *   timeout; past a bound a request waits for a connection, first come first served.
 *
 * undici's client is loaded at the first plain request: a proxy that only tunnels never loads it.
 */
import { connect as netConnect, type LookupFunction, type Socket } from 'node:net';
import type { Client } from 'undici';
import type { UpstreamLimits } from './types.ts';
import { upstreamTimeout } from './upstream-failure.ts';

/** Where one request's connection goes, and how it is made. */
export interface OriginAddress {
  /** What the socket connects to (IPv6 without brackets). */
  host: string;
  port: number;
  /** The only resolution a new connection may use (the admission's pinned lookup). */
  lookup?: LookupFunction;
  localAddress?: string;
  family?: 4 | 6;
}

export interface OriginTimeouts {
  /** Connecting may take this long (ETIMEDOUT). */
  connectMs: number;
  /** An upstream that sends nothing for this long, for its head or within its body, is given up. */
  idleMs: number;
}

/** One connection lent to one request until `release`. */
export interface Lease {
  readonly client: Client;
  /** True when the connection served a request before this one. */
  readonly reused: boolean;
  /** Its socket, once connected. */
  socket(): Socket | undefined;
}

type Give = (lease: Lease | Error) => void;

interface Connection {
  readonly key: string;
  client: Client;
  socket: Socket | undefined;
  dropped: boolean;
}

interface Waiter {
  readonly key: string;
  readonly address: OriginAddress;
  readonly give: Give;
  cancelled: boolean;
}

/** A second connect of one `Client` (its socket closed under a request it was given): the request fails as on a reset. */
function reconnectRefused(): NodeJS.ErrnoException {
  return Object.assign(new Error('the upstream connection closed'), { code: 'ECONNRESET' });
}

/** What a request gets from a retired pool: a reset, as when its connection closes. */
function poolClosing(): NodeJS.ErrnoException {
  return Object.assign(new Error('the proxy is closing its upstream connections'), { code: 'ECONNRESET' });
}

type ClientClass = typeof Client;
let ClientOf: ClientClass | undefined;
let loading: Promise<ClientClass> | undefined;

function loadClient(): Promise<ClientClass> {
  // The client module alone (undici-client.d.ts), not the package's index.
  loading ??= import('undici/lib/dispatcher/client.js').then((m) => (ClientOf = m.default));
  return loading;
}

export class OriginPool {
  readonly #limits: UpstreamLimits;
  readonly #timeouts: OriginTimeouts;
  readonly #idle = new Map<string, Connection[]>();
  readonly #open = new Map<string, number>();
  readonly #all = new Set<Connection>();
  #waiting: Waiter[] = [];
  #retired = false;

  constructor(limits: UpstreamLimits, timeouts: OriginTimeouts) {
    this.#limits = limits;
    this.#timeouts = timeouts;
  }

  /** Connections open now (idle and lent). */
  get size(): number {
    return this.#all.size;
  }

  /**
   * Lends a connection to `address` (an idle one, the most recently used first, or a new one) to
   * `give`, now or when a bound frees one; a retired or destroyed pool gives an error. Returns a
   * function that withdraws a request still waiting.
   */
  acquire(address: OriginAddress, give: Give): () => void {
    const waiter: Waiter = { key: `${address.host}:${address.port}:${address.localAddress ?? ''}`, address, give, cancelled: false };
    const withdraw = (): void => {
      waiter.cancelled = true;
    };
    if (ClientOf === undefined) {
      loadClient().then(
        () => this.#serve(waiter),
        (err: unknown) => give(err as Error),
      );
      return withdraw;
    }
    this.#serve(waiter);
    return withdraw;
  }

  /** Takes a lent connection back once its request is over; one that cannot carry another request is closed. */
  release(lease: Lease, reusable: boolean): void {
    // undici closes a connection the answer ended (Connection: close) only after telling the request it completed.
    queueMicrotask(() => this.#return(lease as Loan, reusable));
  }

  /** No new connections: idle ones close now, lent ones when they come back, waiting requests get an error. */
  retire(): void {
    this.#retired = true;
    for (const list of this.#idle.values()) for (const c of list) this.#close(c);
    this.#idle.clear();
    this.#failWaiting();
  }

  /** Closes every connection now, lent or idle. */
  destroy(): void {
    this.retire();
    for (const c of this.#all) this.#close(c);
  }

  #failWaiting(): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const w of waiting) if (!w.cancelled) w.give(poolClosing());
  }

  #serve(waiter: Waiter): void {
    if (waiter.cancelled) return;
    if (this.#retired) return waiter.give(poolClosing());
    const idle = this.#idle.get(waiter.key)?.pop();
    if (idle) return waiter.give(new Loan(idle, true));
    if (!this.#roomFor(waiter.key)) {
      this.#waiting.push(waiter);
      return;
    }
    waiter.give(new Loan(this.#connect(waiter.key, waiter.address), false));
  }

  #roomFor(key: string): boolean {
    return this.#all.size < this.#limits.total && (this.#open.get(key) ?? 0) < this.#limits.perDestination;
  }

  #connect(key: string, address: OriginAddress): Connection {
    const Client = ClientOf as ClientClass;
    const host = address.host.includes(':') ? `[${address.host}]` : address.host;
    let connects = 0;
    const connection: Connection = { key, client: undefined as unknown as Client, socket: undefined, dropped: false };
    connection.client = new Client(`http://${host}:${address.port}`, {
      pipelining: 1,
      keepAliveTimeout: this.#limits.idleMs,
      keepAliveMaxTimeout: this.#limits.idleMs,
      headersTimeout: this.#timeouts.idleMs,
      bodyTimeout: this.#timeouts.idleMs,
      connect: (_options, callback) => {
        if (connects++ > 0) return callback(reconnectRefused(), null);
        const socket = netConnect({
          host: address.host,
          port: address.port,
          noDelay: true,
          ...(address.lookup ? { lookup: address.lookup } : {}),
          ...(address.localAddress ? { localAddress: address.localAddress, family: address.family } : {}),
        });
        let settled = false;
        const failed = (err: Error): void => {
          socket.destroy();
          if (settled) return;
          settled = true;
          callback(err, null);
        };
        socket.setTimeout(this.#timeouts.connectMs, () => failed(upstreamTimeout('connecting to the destination')));
        socket.once('error', failed);
        socket.once('connect', () => {
          if (settled) return;
          settled = true;
          socket.setTimeout(0);
          socket.removeListener('error', failed);
          connection.socket = socket;
          callback(null, socket);
        });
      },
    });
    connection.client.on('disconnect', () => this.#drop(connection));
    connection.client.on('connectionError', () => this.#drop(connection));
    this.#all.add(connection);
    this.#open.set(key, (this.#open.get(key) ?? 0) + 1);
    return connection;
  }

  #return(loan: Loan, reusable: boolean): void {
    const c = loan.connection;
    if (c.dropped) return;
    const alive = reusable && !this.#retired && c.socket !== undefined && !c.socket.destroyed && !c.client.destroyed && !c.client.closed;
    if (!alive) return this.#close(c);
    const next = this.#nextWaiter(c.key);
    if (next) return next.give(new Loan(c, true));
    const idle = this.#idle.get(c.key) ?? [];
    if (idle.length >= this.#limits.idlePerDestination) return this.#close(c);
    idle.push(c);
    this.#idle.set(c.key, idle);
  }

  #nextWaiter(key: string): Waiter | undefined {
    const i = this.#waiting.findIndex((w) => !w.cancelled && w.key === key);
    if (i < 0) return undefined;
    return this.#waiting.splice(i, 1)[0];
  }

  #close(c: Connection): void {
    this.#drop(c);
    void c.client.destroy().catch(() => undefined);
  }

  /** The connection leaves the pool (it closed, failed or was closed); a request waiting for room may now connect. */
  #drop(c: Connection): void {
    if (c.dropped) return;
    c.dropped = true;
    this.#all.delete(c);
    const open = (this.#open.get(c.key) ?? 1) - 1;
    if (open > 0) this.#open.set(c.key, open);
    else this.#open.delete(c.key);
    const idle = this.#idle.get(c.key);
    if (idle) {
      const at = idle.indexOf(c);
      if (at >= 0) idle.splice(at, 1);
      if (idle.length === 0) this.#idle.delete(c.key);
    }
    if (!c.client.destroyed) void c.client.destroy().catch(() => undefined);
    this.#waiting = this.#waiting.filter((w) => !w.cancelled);
    const i = this.#waiting.findIndex((w) => this.#roomFor(w.key));
    if (i >= 0) this.#serve(this.#waiting.splice(i, 1)[0] as Waiter);
  }
}

class Loan implements Lease {
  readonly connection: Connection;
  readonly reused: boolean;
  constructor(connection: Connection, reused: boolean) {
    this.connection = connection;
    this.reused = reused;
  }
  get client(): Client {
    return this.connection.client;
  }
  socket(): Socket | undefined {
    return this.connection.socket;
  }
}
