import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Connection caps of one HTTP listener, so that a flood of idle sockets can take neither the
 * process's file descriptors (every other socket, file and Redis connection of the process needs
 * them too) nor the health endpoints:
 *
 * - at most `maxConnections` sockets at once; beyond, a new one is closed as it is accepted;
 * - of those, `reserved` are kept for the reserved paths (`/healthz`, `/readyz`, the echo): a
 *   socket accepted while the general share is full, or while its peer already holds `perPeer`
 *   general ones, goes to the reserve, where only those paths are answered (anything else: a fast
 *   503) and it gets `reserveIdleMs` to send its request and is closed after one answer;
 * - short header, request and keep-alive timeouts, and a socket silent from the start closed after
 *   the header timeout: an idle socket is closed within seconds.
 */
export interface ConnectionLimits {
  maxConnections: number;
  reserved: number;
  perPeer: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  reserveIdleMs: number;
}

/** What an operator may choose (`--max-connections`, `--max-connections-per-peer`); the rest are fixed. */
export interface RequestedLimits {
  maxConnections: number;
  perPeer: number;
}

/** How often node looks for sockets past their header or request deadline (its default, 30 s, would hold an idle socket up to 40 s). */
export const CONNECTIONS_CHECKING_INTERVAL_MS = 1000;

const FIXED = { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 5_000, reserveIdleMs: 3_000 } as const;

/**
 * The limits a listener gets: what was asked, but never more than `share` of the process's
 * open-files limit (so the listener cannot run the process out of descriptors), with a sixteenth
 * (at least 4) reserved, and a peer's general share at most half of the general share.
 */
export function effectiveLimits(requested: RequestedLimits, openFiles: number | undefined, share: number): ConnectionLimits {
  const budget = openFiles !== undefined && Number.isFinite(openFiles) ? Math.max(16, Math.floor(openFiles * share)) : Infinity;
  const maxConnections = Math.max(2, Math.min(requested.maxConnections, budget));
  const reserved = Math.min(maxConnections - 1, Math.max(4, Math.floor(maxConnections / 16)));
  const general = maxConnections - reserved;
  const perPeer = Math.max(1, Math.min(requested.perPeer, Math.ceil(general / 2)));
  return { maxConnections, reserved, perPeer, ...FIXED };
}

/**
 * Closes a socket of `server` that has not sent a request within `ms` of connecting. Node's own
 * header timeout starts at the first byte of a request: a socket that never sends one would be
 * held for good. The socket's inactivity timeout does it (node's http server destroys a socket
 * that times out with no request on it, and so does the forward proxy, on node's server); once a request (or a CONNECT)
 * arrives it is cleared, and node's keep-alive timeout takes over between requests.
 */
export function closeSilentSockets(server: Server, ms: number): void {
  server.on('connection', (socket: Socket) => socket.setTimeout(ms));
  const clear = (req: { socket: Socket }): void => void req.socket.setTimeout(0);
  server.prependListener('request', clear);
  server.prependListener('connect', clear);
}

export type RefusalReason = 'over-capacity' | 'reserved-only';

export interface ConnectionGuard {
  /** True when the socket is one of the reserve's: only the reserved paths are answered on it. */
  inReserve(socket: Socket): boolean;
}

/**
 * Applies `limits` to `server` (before it listens, or at once after). `onRefused` is told of each
 * socket closed at accept (`over-capacity`) and each request answered 503 in the reserve
 * (`reserved-only`, reported by the caller through the returned guard's user).
 */
export function guardConnections(server: Server, limits: ConnectionLimits, onRefused: (reason: RefusalReason) => void): ConnectionGuard {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  // A backstop: the accounting below never lets more than this many sockets stay.
  server.maxConnections = limits.maxConnections;
  server.on('drop', () => onRefused('over-capacity'));
  closeSilentSockets(server, limits.headersTimeoutMs);
  const general = limits.maxConnections - limits.reserved;
  const peers = new Map<string, number>();
  const reserve = new WeakSet<Socket>();
  let generalCount = 0;
  let reserveCount = 0;
  server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress ?? '';
    const held = peers.get(peer) ?? 0;
    if (generalCount < general && held < limits.perPeer) {
      generalCount++;
      peers.set(peer, held + 1);
      socket.once('close', () => {
        generalCount--;
        const left = (peers.get(peer) ?? 1) - 1;
        if (left <= 0) peers.delete(peer);
        else peers.set(peer, left);
      });
      return;
    }
    if (reserveCount < limits.reserved) {
      reserveCount++;
      reserve.add(socket);
      socket.setTimeout(limits.reserveIdleMs, () => socket.destroy());
      socket.once('close', () => reserveCount--);
      return;
    }
    onRefused('over-capacity');
    socket.destroy();
  });
  return { inReserve: (socket) => reserve.has(socket) };
}
