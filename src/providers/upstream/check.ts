/**
 * The upstream provider's check: one target per endpoint, each a GET of the API's echo through
 * that upstream proxy with the vendor's credentials (absolute-form for http(s)://, over a SOCKS5
 * CONNECT for socks5://), the reason from what actually failed.
 */
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { connectThroughHop, PROXY_AUTH } from '../../forward-proxy/chain-connect.ts';
import { hopAuthorization } from '../../forward-proxy/chain-hop.ts';
import { upstreamFailure } from '../../forward-proxy/upstream-failure.ts';
import { truncateMessage } from '../../health/message.ts';
import type { Reason } from '../../health/reasons.ts';
import type { TargetResult } from '../../health/types.ts';
import type { Redactor } from '../../secrets/secret-registry.ts';
import type { UpstreamEndpoint } from './endpoints.ts';

const MAX_BODY = 64 * 1024;

interface Answer {
  status: number;
  body: string;
}

/** GET `echo` through the endpoint's upstream proxy. */
function getThrough(endpoint: UpstreamEndpoint, echo: URL, signal: AbortSignal): Promise<Answer> {
  const { hop } = endpoint;
  const port = Number(echo.port || 80);
  const host = echo.hostname.startsWith('[') ? echo.hostname.slice(1, -1) : echo.hostname;
  const base: RequestOptions = { method: 'GET', agent: false, signal, headers: { host: echo.host, accept: 'application/json', connection: 'close' } };
  let options: RequestOptions;
  if (hop.scheme === 'socks5') {
    // No agent (not even `false`): node would ignore createConnection and connect directly.
    const { agent: _none, ...direct } = base;
    options = {
      ...direct,
      path: `${echo.pathname}${echo.search}`,
      createConnection: ((_o: unknown, done: (err: Error | null, socket?: Socket) => void) => {
        connectThroughHop(hop, host, port, { timeoutMs: 30_000 }).then(
          (socket) => {
            socket.resume();
            done(null, socket);
          },
          (err: unknown) => done(err as Error),
        );
        return undefined;
      }) as unknown as RequestOptions['createConnection'],
    };
  } else {
    const auth = hopAuthorization(hop);
    options = {
      ...base,
      host: hop.host,
      port: hop.port,
      path: echo.href,
      headers: { ...base.headers, ...(auth ? { 'proxy-authorization': auth } : {}) },
      ...(hop.scheme === 'https' ? { servername: hop.servername ?? hop.host, ...(hop.ca ? { ca: hop.ca } : {}) } : {}),
    };
  }
  const send = hop.scheme === 'https' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(options, (res: IncomingMessage) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
        if (body.length > MAX_BODY) res.destroy(new Error(`answer longer than ${MAX_BODY} bytes`));
      });
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end();
  });
}

/** The reason an error stands for: refused → Unreachable, a timeout → Timeout, credentials → Unauthorized, the rest Error. */
function reasonOf(err: unknown): { reason: Reason; what: string } {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === PROXY_AUTH) return { reason: 'Unauthorized', what: 'the upstream proxy refused the credentials' };
  const failure = upstreamFailure(err);
  switch (failure.kind) {
    case 'refused':
    case 'unreachable':
    case 'unresolvable':
      return { reason: 'Unreachable', what: `the upstream proxy is ${failure.kind}` };
    case 'timeout':
      return { reason: 'Timeout', what: 'the upstream proxy timed out' };
    case 'upstream-tls':
      return { reason: 'Error', what: 'TLS to the upstream proxy failed' };
    default:
      return { reason: 'Error', what: `the upstream proxy failed (${failure.kind})` };
  }
}

export interface UpstreamCheckOptions {
  /** The API's echo (`http://…/v1/echo`); undefined when this process does not know it. */
  echoUrl: string | undefined;
  redactor: Redactor;
  /** Each endpoint's own deadline within the check's signal. */
  stepTimeoutMs?: number;
}

/** Checks one endpoint. Once `signal` has ended, a failure is `Timeout`, whatever it said. */
export async function checkEndpoint(endpoint: UpstreamEndpoint, options: UpstreamCheckOptions, signal: AbortSignal): Promise<TargetResult> {
  const started = performance.now();
  const details: Record<string, string> = { upstream: endpoint.url, proxy: endpoint.proxy };
  const result = (ready: boolean, reason: Reason, message: string): TargetResult => ({
    target: endpoint.name,
    ready,
    reason,
    message: truncateMessage(options.redactor.redact(message)),
    details,
    durationSeconds: (performance.now() - started) / 1000,
  });
  if (signal.aborted) return result(false, 'Timeout', `the check deadline passed before ${endpoint.url} was probed`);
  if (options.echoUrl === undefined) return result(false, 'Error', 'no echo URL is known to this process: the upstream cannot be probed');
  const echo = new URL(options.echoUrl);
  const step = AbortSignal.any([signal, AbortSignal.timeout(options.stepTimeoutMs ?? 10_000)]);
  try {
    const answer = await getThrough(endpoint, echo, step);
    if (answer.status === 407) return result(false, 'Unauthorized', `${endpoint.url} refused the credentials (407 Proxy Authentication Required)`);
    if (answer.status >= 500) return result(false, 'Error', `${endpoint.url} answered HTTP ${answer.status} for the echo`);
    if (answer.status !== 200) return result(false, 'Error', `the echo through ${endpoint.url} answered HTTP ${answer.status}`);
    const address = (JSON.parse(answer.body) as { address?: unknown }).address;
    if (typeof address === 'string') details.egressIp = address;
    return result(true, 'Ok', `the echo answered through ${endpoint.url}`);
  } catch (err) {
    if (step.aborted) return result(false, 'Timeout', `no answer through ${endpoint.url} in time`);
    if (err instanceof SyntaxError) return result(false, 'Error', `the echo through ${endpoint.url} answered no JSON`);
    const { reason, what } = reasonOf(err);
    return result(false, reason, `${what}: ${endpoint.url}: ${(err as Error).message}`);
  }
}
