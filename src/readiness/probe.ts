import { request, type IncomingMessage } from 'node:http';
import { isIP, Socket } from 'node:net';
import { observerFailure } from '../observer-errors.ts';
import { normalizeAddress } from './echo.ts';
import { SpanStatusCode } from '@opentelemetry/api';
import { withSpan } from '../telemetry/spans.ts';
import type { ProxyCredentials } from '../model/proxy-credentials.ts';
import type { ProbeFailureCause } from '../proxies/readiness-contract.ts';

export interface ProbeOptions {
  /** The forward proxy (HTTP with CONNECT, Basic Proxy-Authorization). */
  endpoint: { host: string; port: number };
  credentials: ProxyCredentials;
  /** An `http://` URL answering `{ "address": "<caller's address>" }` (the API's `GET /v1/echo`). */
  echoUrl: string;
  /** Bearer token for the echo endpoint when the API requires one (sent to the echo, never logged). */
  echoToken?: string;
  signal: AbortSignal;
  /** Deadline of each step (the TCP connect, the request through the proxy); none when undefined. */
  stepTimeoutMs?: number;
}

export type ProbeStage = 'tcp' | 'proxy-auth' | 'http';

export type ProbeResult =
  | { ok: true; egressIp: string; durationSeconds: number }
  | { ok: false; stage: ProbeStage; cause: ProbeFailureCause; message: string; durationSeconds: number };

const MAX_BODY = 64 * 1024;

function tcpConnect(host: string, port: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    signal.throwIfAborted();
    const socket = new Socket();
    const onAbort = (): void => {
      socket.destroy();
      reject(signal.reason instanceof Error ? signal.reason : new Error('aborted', { cause: signal.reason }));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    const done = (err?: Error): void => {
      signal.removeEventListener('abort', onAbort);
      socket.destroy();
      if (err) reject(err);
      else resolve();
    };
    socket.once('connect', () => done());
    socket.once('error', done);
    socket.connect({ host, port });
  });
}

interface EchoResponse {
  status: number;
  body: string;
}

function getThroughProxy(options: ProbeOptions, url: URL, signal: AbortSignal): Promise<EchoResponse> {
  const { endpoint, credentials } = options;
  const auth = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: endpoint.host,
        port: endpoint.port,
        method: 'GET',
        path: url.href,
        agent: false,
        signal,
        headers: {
          host: url.host,
          'proxy-authorization': `Basic ${auth}`,
          accept: 'application/json',
          connection: 'close',
          ...(options.echoToken === undefined ? {} : { authorization: `Bearer ${options.echoToken}` }),
        },
      },
      (res: IncomingMessage) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
          if (body.length > MAX_BODY) res.destroy(new Error(`echo response longer than ${MAX_BODY} bytes`));
        });
        res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.once('error', reject);
      },
    );
    req.once('error', reject);
    req.end();
  });
}

function parseAddress(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as unknown;
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    const address = (parsed as { address?: unknown }).address;
    if (typeof address !== 'string') return undefined;
    const normalized = normalizeAddress(address);
    return isIP(normalized) ? normalized : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Probes a forward proxy the way a crawler uses it: a TCP connect to the proxy, then a GET of
 * `echoUrl` through it (absolute-URI request with Basic Proxy-Authorization), whose answer gives
 * the proxy's egress IP. A 407 is stage `proxy-auth`; any other failure after the connect is
 * `http`. When the signal aborts, the probe rejects with the signal's reason (the caller's
 * deadline decides what that means) instead of blaming a stage; when this process is out of
 * descriptors or memory (EMFILE, ENFILE, ENOMEM) it rejects with ObserverResourceError: the
 * observer's failure, never the proxy's.
 */
export function probeProxy(options: ProbeOptions): Promise<ProbeResult> {
  // The proxy's address and the outcome; never its credentials nor the echo token.
  return withSpan('readiness probe', { 'server.address': options.endpoint.host, 'server.port': options.endpoint.port }, async (span) => {
    const result = await probe(options);
    span.setAttributes(
      result.ok
        ? { 'egress.probe.ok': true }
        : { 'egress.probe.ok': false, 'egress.probe.stage': result.stage, 'egress.probe.cause': result.cause, 'error.type': `probe-${result.cause}` },
    );
    if (!result.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: `${result.stage}: ${result.cause}` });
    return result;
  });
}

async function probe(options: ProbeOptions): Promise<ProbeResult> {
  const { endpoint, signal, stepTimeoutMs } = options;
  const started = performance.now();
  const elapsed = (): number => (performance.now() - started) / 1000;
  const fail = (stage: ProbeStage, message: string, cause: ProbeFailureCause = 'error'): ProbeResult => ({
    ok: false,
    stage,
    cause,
    message,
    durationSeconds: elapsed(),
  });
  /** The caller's signal, plus this step's own deadline when there is one. */
  const stepSignal = (): { signal: AbortSignal; expired: () => boolean } => {
    if (stepTimeoutMs === undefined) return { signal, expired: () => false };
    const own = AbortSignal.timeout(stepTimeoutMs);
    return { signal: AbortSignal.any([signal, own]), expired: () => own.aborted && !signal.aborted };
  };
  signal.throwIfAborted();
  const url = new URL(options.echoUrl);
  if (url.protocol !== 'http:') return fail('http', `echo URL must be http://, got ${url.protocol}`);

  const connect = stepSignal();
  try {
    await tcpConnect(endpoint.host, endpoint.port, connect.signal);
  } catch (err) {
    signal.throwIfAborted();
    // This process out of descriptors or memory is no verdict on the proxy: thrown, never a failed probe.
    const own = observerFailure('readiness probe', err);
    if (own) throw own;
    const where = `proxy ${endpoint.host}:${endpoint.port}`;
    if (connect.expired()) return fail('tcp', `no TCP connection to ${where} within ${stepTimeoutMs} ms`, 'timeout');
    const refused = (err as NodeJS.ErrnoException).code === 'ECONNREFUSED';
    return fail('tcp', `cannot connect to ${where}: ${(err as Error).message}`, refused ? 'refused' : 'error');
  }

  let response: EchoResponse;
  const get = stepSignal();
  try {
    response = await getThroughProxy(options, url, get.signal);
  } catch (err) {
    signal.throwIfAborted();
    const own = observerFailure('readiness probe', err);
    if (own) throw own;
    if (get.expired()) return fail('http', `GET ${url.href} through proxy ${endpoint.host}:${endpoint.port}: no answer within ${stepTimeoutMs} ms`, 'timeout');
    return fail('http', `GET ${url.href} through proxy ${endpoint.host}:${endpoint.port} failed: ${(err as Error).message}`);
  }
  if (response.status === 407) return fail('proxy-auth', `proxy ${endpoint.host}:${endpoint.port} refused the credentials (407 Proxy Authentication Required)`);
  if (response.status !== 200) {
    return fail('http', `GET ${url.href} through proxy ${endpoint.host}:${endpoint.port} answered HTTP ${response.status}: ${response.body.slice(0, 200)}`);
  }
  const egressIp = parseAddress(response.body);
  if (!egressIp) return fail('http', `echo at ${url.href} answered without an IP address in "address": ${response.body.slice(0, 200)}`);
  return { ok: true, egressIp, durationSeconds: elapsed() };
}
