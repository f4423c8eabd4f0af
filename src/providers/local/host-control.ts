/**
 * The proxy host's control socket, `<dataDir>/host/control.sock` (mode 0600 in a 0700 directory),
 * speaking HTTP (the routes: proxy-host.ts). A request is answered from the proxies the host
 * serves (host-proxies.ts); the host itself stops through `shutdown`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { chmod, mkdir, rm } from 'node:fs/promises';
import type { Logger } from '../../logging.ts';
import { HttpError, type HostedProxies } from './host-proxies.ts';
import { asChainHop, type ChainHop } from '../../forward-proxy/chain-hop.ts';

/** A control request's body is one JSON document (a front's upstream, with its extra CA certificates). */
const MAX_BODY_BYTES = 1024 * 1024;

/** The body of a PUT: the upstream proxy of a front, or nothing. */
async function readHop(req: IncomingMessage): Promise<ChainHop | undefined> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `a control request body exceeds ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'the control request body is not JSON');
  }
  const raw = (body as { upstream?: unknown } | null)?.upstream;
  if (raw === undefined) return undefined;
  const hop = asChainHop(raw);
  if (!hop) throw new HttpError(400, 'the upstream in the control request is not a valid upstream proxy');
  return hop;
}

const NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Whether the host is stopping: set by its shutdown, and by the delete of its last proxy. */
export interface HostState {
  closing: boolean;
}

export interface ControlOptions {
  proxies: HostedProxies;
  startedAt: string;
  state: HostState;
  /** A request about a proxy arrived: the exit when idle waits. */
  busy(): void;
  shutdown(reason: string): void;
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** Answers one control request: the status, or a start, reload or stop of one proxy. */
export function controlHandler(options: ControlOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const { proxies, startedAt, state } = options;
  return async (req, res) => {
    if (req.method !== 'PUT') req.resume();
    if (state.closing) return reply(res, 503, { error: 'the proxy host is stopping' });
    const url = req.url ?? '';
    if (req.method === 'GET' && url === '/status') return reply(res, 200, { pid: process.pid, startedAt, proxies: proxies.size });
    if (req.method === 'GET' && url === '/status?names=1')
      return reply(res, 200, { pid: process.pid, startedAt, proxies: proxies.size, names: proxies.names() });
    const name = /^\/proxies\/([^/]+)$/.exec(url)?.[1];
    if (!name || !NAME_PATTERN.test(name)) {
      req.resume();
      return reply(res, 404, { error: 'no such route' });
    }
    options.busy();
    try {
      if (req.method === 'PUT') return reply(res, 200, await proxies.ensure(name, await readHop(req)));
      if (req.method === 'DELETE') {
        const stopped = await proxies.remove(name);
        const remaining = proxies.size;
        // The last proxy gone: the host goes too (a worker starts one again for the next proxy).
        if (remaining === 0 && proxies.inProgress <= 1) state.closing = true;
        reply(res, 200, { stopped, remaining });
        if (state.closing) res.once('finish', () => options.shutdown('its last proxy was deleted'));
        return;
      }
      return reply(res, 405, { error: 'method not allowed' });
    } catch (err) {
      return reply(res, err instanceof HttpError ? err.status : 500, { error: (err as Error).message });
    }
  };
}

/**
 * Listens on `socket` in `dir` (made 0700; a socket left by a killed host removed first: the
 * caller made sure no host runs for this directory), the socket itself 0600. `afterEach` runs
 * once each request is answered.
 */
export async function listenControl(
  dir: string,
  socket: string,
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
  logger: Logger,
  afterEach: () => void,
): Promise<Server> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  await rm(socket, { force: true });
  const control = createServer((req, res) => {
    handle(req, res)
      .catch((err: unknown) => {
        logger.error({ err: (err as Error).message }, 'control request failed');
        if (!res.headersSent) res.writeHead(500).end();
      })
      .finally(afterEach);
  });
  control.headersTimeout = 10_000;
  control.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    control.once('error', reject);
    control.listen(socket, () => resolve());
  });
  await chmod(socket, 0o600);
  return control;
}
