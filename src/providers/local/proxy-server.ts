/**
 * One authenticated forward proxy (HTTP with CONNECT, on proxy-chain) enforcing the egress policy:
 * what a per-instance proxy process, a container proxy and each proxy of the proxy host listen
 * with. Bundled into the proxy programs (proxy-program.ts): no prom-client, no worker modules.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { Agent } from 'node:http';
import { isIPv6 } from 'node:net';
import { RequestError, Server, type PrepareRequestFunctionOpts, type PrepareRequestFunctionResult } from 'proxy-chain';
import { checkEgress, EgressDeniedError } from '../../egress/enforce.ts';
import { closeSilentSockets } from '../../http/connection-limits.ts';
import type { LivePolicy } from '../../egress/live-policy.ts';
import type { Logger } from '../../logging.ts';
import type { DenialRecorder } from './denial-stats.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/** A constant-time check of a Basic credential against what `current()` returns at the time (rotations apply at once). */
export function credentialCheck(current: () => ProxyCredentials | undefined): (username: string, password: string) => boolean {
  return (username, password) => {
    const c = current();
    return c !== undefined && sameSecret(username, c.username) && sameSecret(password, c.password);
  };
}

/** How long a destination's name may take to resolve before the request is refused as unresolvable. */
const RESOLVE_TIMEOUT_MS = 10_000;

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

/** The path and query of a plain-HTTP request's absolute URI (what the echo exception compares). */
function pathOf(url: string | undefined): string {
  try {
    const u = new URL(url ?? '');
    return `${u.pathname}${u.search}`;
  } catch {
    return '';
  }
}

export interface Egress {
  policy: LivePolicy;
  denials: DenialRecorder;
  logger: Logger;
}

/** Upstream keep-alive sockets belong to one policy generation: a changed policy never reuses a socket the old one judged. */
function agentFor(egress: Egress): () => Agent {
  let generation = egress.policy.generation;
  let agent = new Agent({ keepAlive: true });
  return () => {
    if (egress.policy.generation !== generation) {
      agent.destroy();
      agent = new Agent({ keepAlive: true });
      generation = egress.policy.generation;
    }
    return agent;
  };
}

/** A hostile client can be refused at line rate: one log line per reason per minute, the metric counts them all. */
function denialLog(logger: Logger): (reason: string, fields: Record<string, unknown>) => void {
  const last = new Map<string, number>();
  return (reason, fields) => {
    const now = performance.now();
    const previous = last.get(reason);
    if (previous !== undefined && now - previous < 60_000) return;
    last.set(reason, now);
    logger.info({ ...fields, reason }, 'egress denied (further denials for this reason in the next minute are counted, not logged)');
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
}

/** A client that sends no request head within this long is disconnected (node's default, 60 s, and none for a silent socket, let idle sockets pile up). */
const HEADERS_TIMEOUT_MS = 10_000;
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
const TEXT = 'text/plain; charset=utf-8';

/**
 * A refusal of a plain-HTTP request answered through its own response, in order behind the
 * responses before it on the connection (pipelining). proxy-chain's own error path writes to the
 * socket and closes it, which would drop a response still in flight ahead of it.
 */
function refusal(statusCode: number, body: string, headers: Record<string, string> = {}): PrepareRequestFunctionResult {
  return { customResponseFunction: () => ({ statusCode, body, headers: { 'content-type': TEXT, ...headers } }) };
}

/** Starts one proxy listening; resolves once it listens (rejects with the listen error, EADDRINUSE included). */
export async function listenProxy(options: ProxyListenOptions): Promise<Server> {
  const { check, egress, localAddress } = options;
  const httpAgent = agentFor(egress);
  const logDenial = denialLog(egress.logger);
  const source: Pick<PrepareRequestFunctionResult, 'localAddress' | 'ipFamily'> = localAddress ? { localAddress, ipFamily: isIPv6(localAddress) ? 6 : 4 } : {};
  const prepare = async (opts: PrepareRequestFunctionOpts): Promise<PrepareRequestFunctionResult> => {
    if (!check(opts.username, opts.password)) {
      return opts.isHttp ? refusal(407, 'Proxy credentials required.', { 'proxy-authenticate': 'Basic realm="egress"' }) : { requestAuthentication: true };
    }
    const request = opts.isHttp ? { method: opts.request.method ?? '', path: pathOf(opts.request.url) } : undefined;
    try {
      const dnsLookup = await checkEgress(
        () => egress.policy.current(),
        { hostname: opts.hostname, port: opts.port, ...(request ? { request } : {}) },
        resolveAll,
        AbortSignal.timeout(RESOLVE_TIMEOUT_MS),
      );
      // proxy-chain types it as dns.lookup itself; net and http only call it as a LookupFunction.
      return {
        ...source,
        ...(dnsLookup ? { dnsLookup: dnsLookup as unknown as NonNullable<PrepareRequestFunctionResult['dnsLookup']> } : {}),
        ...(opts.isHttp ? { httpAgent: httpAgent() } : {}),
      };
    } catch (err) {
      if (!(err instanceof EgressDeniedError)) throw err;
      egress.denials.record(err.reason);
      logDenial(err.reason, { target: `${opts.hostname}:${opts.port}`, method: opts.isHttp ? request?.method : 'CONNECT' });
      const message = `Forbidden by egress policy: ${err.reason}\n`;
      if (opts.isHttp) return refusal(403, message);
      throw new RequestError(message, 403);
    }
  };
  const server = new Server({
    host: options.host,
    port: options.port,
    verbose: false,
    authRealm: 'egress',
    prepareRequestFunction: prepare,
  });
  server.server.maxConnections = options.maxConnections ?? 1024;
  closeSilentSockets(server.server, HEADERS_TIMEOUT_MS);
  server.server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  await server.listen();
  return server;
}
