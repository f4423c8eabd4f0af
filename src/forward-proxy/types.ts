import type { LookupFunction } from 'node:net';
import type { BasicCredentials } from './basic-credentials.ts';
import type { ChainHop } from './chain-hop.ts';
import type { UpstreamFailure } from './upstream-failure.ts';

/** An answer the proxy gives itself (`ForwardProxyOptions.answerOwn`): nothing is forwarded. */
export interface OwnAnswer {
  status: number;
  body: string;
  headers?: Readonly<Record<string, string>>;
}

/** Where a client asked to go, as it wrote it. */
export interface Destination {
  /** A name, an IP literal, or `[v6]` (URL syntax), exactly as the request target spelled it. */
  hostname: string;
  port: number;
  /** Plain HTTP only: the method and the path with its query. */
  request?: { method: string; path: string };
}

/** What the proxy carried for a client: one plain-HTTP request, or one tunnel (HTTP CONNECT or SOCKS5 CONNECT). */
export type TrafficKind = 'request' | 'tunnel';

/** The proxy refuses: nothing is connected, the client gets `status` with `message` as the body. */
export interface Refusal {
  allowed: false;
  status: number;
  message: string;
  headers?: Readonly<Record<string, string>>;
}

/** The proxy may connect; `lookup` (when given) is the only resolution the connection may use. */
export interface Admitted {
  allowed: true;
  lookup?: LookupFunction;
}

export type Admission = Admitted | Refusal;

export interface ForwardProxyOptions {
  host: string;
  /** 0: a kernel-chosen port. */
  port: number;
  /**
   * Decides every request and every CONNECT before anything connects: the credentials the client
   * sent (undefined when none) and where it asked to go. It runs once per plain-HTTP request and
   * once per tunnel, never once per connection.
   */
  admit: (credentials: BasicCredentials | undefined, destination: Destination) => Promise<Admission>;
  /**
   * Upstream keep-alive connections are reused only within one generation: when it changes, the
   * idle ones are closed and new requests open new ones (a changed policy never reuses a socket the
   * old one admitted).
   */
  generation: () => number;
  /** The address every outgoing connection binds; the destination is then reached over its family only. */
  localAddress?: string;
  /** Client connections held at once; past it a new one is closed as it is accepted. */
  maxConnections: number;
  /** A client that sends no request head within this long is disconnected. */
  headersTimeoutMs: number;
  /** An idle client keep-alive connection is closed after this long. */
  keepAliveTimeoutMs: number;
  /** Told of each admitted destination that could not be reached (the client got 502 or 504). */
  onUpstreamFailure?: (failure: UpstreamFailure, destination: Destination, err: unknown) => void;
  /**
   * The upstream proxy every admitted request and tunnel goes through (issue 24), read at each
   * one (a rotated vendor password applies to the next); undefined: straight to the destination.
   * `admit` is unchanged: the policy judges what the client asked for, never the hop.
   */
  chain?: () => ChainHop | undefined;
  /**
   * Also speak SOCKS5 on the same port (username/password, CONNECT only): `authenticate` answers
   * RFC 1929's question, `admit` still decides every CONNECT. Absent: HTTP only.
   */
  socks5?: { authenticate(username: string, password: string): boolean };
  /** Told the bytes each chained tunnel (at its end, after the hop's handshake) or request (its heads and bodies, at the answer's end) sent to and received from the hop. */
  onChainTraffic?: (sent: number, received: number) => void;
  /**
   * Told of every admitted request and tunnel once it ends (accounting; absent: nothing is counted
   * and no listener is added): where the client asked to go, and the bytes sent to the destination
   * (or hop) and received from it on the upstream connection: a plain request's head and body
   * each way, a tunnel's payload (not the CONNECT or SOCKS5 exchange, not a hop's handshake). A
   * request or tunnel whose destination could not be reached is told with the bytes that moved (0).
   */
  onTraffic?: (hostname: string, kind: TrafficKind, up: number, down: number) => void;
  /**
   * Plain-HTTP requests the proxy answers itself, asked for each one after its target and
   * credentials are read and before `admit`: an answer, or undefined to go on as usual. A request
   * it answers is never forwarded, its target never resolved, its traffic not counted (the proxy
   * program's own traffic report: src/providers/local/traffic-report.ts). CONNECT and SOCKS5 are
   * never asked.
   */
  answerOwn?: (credentials: BasicCredentials | undefined, destination: Destination) => OwnAnswer | undefined;
  /** Told of an unexpected failure while handling a request or tunnel (its client connection was closed). */
  onError?: (err: unknown) => void;
}

/** Upstream sockets a proxy holds: per destination, and idle ones kept. */
export interface UpstreamLimits {
  /** Connections at once to one destination (host, port); further requests wait for one. */
  perDestination: number;
  /** Idle keep-alive connections kept per destination. */
  idlePerDestination: number;
  /** Upstream connections of all destinations at once. */
  total: number;
  /** An idle keep-alive connection is closed after this long (or the origin's `Keep-Alive: timeout` hint, when shorter). */
  idleMs: number;
}
