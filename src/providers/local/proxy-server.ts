/**
 * One authenticated forward proxy enforcing the egress policy (src/forward-proxy, HTTP with
 * CONNECT): what a per-instance proxy process, a container proxy and each proxy of the proxy host
 * listen with. Bundled into the proxy programs (proxy-program.ts): no prom-client, no worker modules.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { checkEgress, EgressDeniedError } from '../../egress/enforce.ts';
import { listenForwardProxy, type ForwardProxy } from '../../forward-proxy/server.ts';
import type { Admission, Destination, ForwardProxyOptions, Refusal, TrafficKind } from '../../forward-proxy/types.ts';
import type { BasicCredentials } from '../../forward-proxy/basic-credentials.ts';
import type { ChainHop } from '../../forward-proxy/chain-hop.ts';
import type { LivePolicy } from '../../egress/live-policy.ts';
import type { Logger } from '../../logging.ts';
import type { DenialRecorder } from './denial-stats.ts';
import type { UpstreamStatsRecorder } from './upstream-stats.ts';
import { trafficReportAnswer } from './traffic-report.ts';
import type { TrafficStats } from './traffic-stats.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

/** One digest of a user and password together (the length prefix keeps `a`+`bc` apart from `ab`+`c`). */
function digestOf(username: string, password: string): Buffer {
  return createHash('sha256').update(`${username.length}:${username}${password}`).digest();
}

/**
 * A constant-time check of a Basic credential against what `current()` returns at the time
 * (rotations apply at once): one digest of what the client sent, compared with the digest of the
 * current credentials (computed once per credentials object).
 */
export function credentialCheck(current: () => ProxyCredentials | undefined): (username: string, password: string) => boolean {
  const expected = new WeakMap<ProxyCredentials, Buffer>();
  return (username, password) => {
    const c = current();
    if (c === undefined) return false;
    let want = expected.get(c);
    if (want === undefined) {
      want = digestOf(c.username, c.password);
      expected.set(c, want);
    }
    return timingSafeEqual(digestOf(username, password), want);
  };
}

/** How long a destination's name may take to resolve before the request is refused as unresolvable. */
const RESOLVE_TIMEOUT_MS = 10_000;
const resolveDeadline = (): AbortSignal => AbortSignal.timeout(RESOLVE_TIMEOUT_MS);

function resolveAll(hostname: string, signal: AbortSignal): Promise<{ address: string; family: number }[]> {
  // getaddrinfo cannot be cancelled: the signal only stops the wait for it.
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(new Error('resolution timed out'));
    signal.addEventListener('abort', onAbort, { once: true });
    lookup(hostname, { all: true, verbatim: true })
      .then(resolve, reject)
      .finally(() => signal.removeEventListener('abort', onAbort));
  });
}

export interface Egress {
  policy: LivePolicy;
  denials: DenialRecorder;
  logger: Logger;
}

/**
 * A hostile client can be refused, or send us to dead destinations, at line rate: one log line per
 * kind per minute (the denial metric counts every refusal).
 */
function oncePerMinute(): (kind: string) => boolean {
  const last = new Map<string, number>();
  return (kind) => {
    const now = performance.now();
    const previous = last.get(kind);
    if (previous !== undefined && now - previous < 60_000) return false;
    last.set(kind, now);
    return true;
  };
}

export interface ProxyListenOptions {
  host: string;
  /** 0: a kernel-chosen port. */
  port: number;
  check: (username: string, password: string) => boolean;
  egress: Egress;
  /** The address every outgoing connection binds (`sourceAddresses`); the destination is then reached over its family only. */
  localAddress?: string;
  /**
   * Client connections this listener holds at once (default 1024); past it a new one is closed as
   * it is accepted, so a flood at one proxy's port cannot take the descriptors of the others.
   */
  maxConnections?: number;
  /** The upstream proxy this one forwards through (an `upstream` provider's front), read at each request. */
  chain?: () => ChainHop | undefined;
  /** A front's counts of what its upstream failed and carried. */
  upstreamStats?: UpstreamStatsRecorder;
  /** Where the traffic of every admitted request and tunnel is counted (traffic-stats.ts); absent: accounting is off. */
  traffic?: TrafficCounter;
  /** This proxy's counts, answered to its own `GET http://egress-proxy.invalid/traffic` (traffic-report.ts); absent: that request is judged like any other. */
  trafficReport?: () => TrafficStats;
}

/** What counts a proxy's traffic: the proxy's own recorder (traffic-stats.ts), or a relay's batch for the host. */
export interface TrafficCounter {
  record(hostname: string, kind: TrafficKind, up: number, down: number): void;
}

/** A client that sends no request head within this long is disconnected (node's default, 60 s, and none for a silent socket, let idle sockets pile up). */
const HEADERS_TIMEOUT_MS = 10_000;
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
const AUTH_REQUIRED: Refusal = {
  allowed: false,
  status: 407,
  message: 'Proxy credentials required.',
  headers: { 'proxy-authenticate': 'Basic realm="egress"' },
};

/** What one proxy answers with, wherever its connections come from: its credentials, the egress policy, the limits. */
export function proxyHandling(options: Omit<ProxyListenOptions, 'host' | 'port'>): Omit<ForwardProxyOptions, 'host' | 'port'> {
  const { check, egress } = options;
  const logDenial = oncePerMinute();
  const logFailure = oncePerMinute();
  const admit = async (credentials: BasicCredentials | undefined, destination: Destination): Promise<Admission> => {
    if (!check(credentials?.username ?? '', credentials?.password ?? '')) return AUTH_REQUIRED;
    try {
      const pinned = await checkEgress(() => egress.policy.current(), destination, resolveAll, resolveDeadline);
      return pinned ? { allowed: true, lookup: pinned } : { allowed: true };
    } catch (err) {
      if (!(err instanceof EgressDeniedError)) throw err;
      egress.denials.record(err.reason);
      if (logDenial(err.reason)) {
        egress.logger.info(
          { target: `${destination.hostname}:${destination.port}`, method: destination.request?.method ?? 'CONNECT', reason: err.reason },
          'egress denied (further denials for this reason in the next minute are counted, not logged)',
        );
      }
      return { allowed: false, status: 403, message: `Forbidden by egress policy: ${err.reason}\n` };
    }
  };
  return {
    admit,
    // SOCKS5 on the same port, with the same credentials and policy (issue 24).
    socks5: { authenticate: check },
    generation: () => egress.policy.generation,
    ...(options.localAddress ? { localAddress: options.localAddress } : {}),
    ...(options.chain ? { chain: options.chain } : {}),
    ...(options.traffic ? { onTraffic: trafficTo(options.traffic) } : {}),
    ...(options.trafficReport ? { answerOwn: trafficReportAnswer(check, options.trafficReport, AUTH_REQUIRED) } : {}),
    ...(options.upstreamStats ? { onChainTraffic: (sent: number, received: number) => options.upstreamStats?.traffic(sent, received) } : {}),
    maxConnections: options.maxConnections ?? 1024,
    headersTimeoutMs: HEADERS_TIMEOUT_MS,
    keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
    onUpstreamFailure: (failure, destination, err) => {
      options.upstreamStats?.failure(failure.kind);
      if (!logFailure(failure.kind)) return;
      egress.logger.warn(
        { target: `${destination.hostname}:${destination.port}`, kind: failure.kind, status: failure.status, err: (err as Error).message },
        'proxied request failed (further failures of this kind in the next minute are not logged)',
      );
    },
    onError: (err) => egress.logger.error({ err: (err as Error).message }, 'proxy failed while handling a request; its connection was closed'),
  };
}

function trafficTo(counter: TrafficCounter): NonNullable<ForwardProxyOptions['onTraffic']> {
  return (hostname, kind, up, down) => counter.record(hostname, kind, up, down);
}

/** Starts one proxy listening; resolves once it listens (rejects with the listen error, EADDRINUSE included). */
export function listenProxy(options: ProxyListenOptions): Promise<ForwardProxy> {
  return listenForwardProxy({ host: options.host, port: options.port, ...proxyHandling(options) });
}
