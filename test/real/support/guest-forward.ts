/**
 * The host ends of a proxy VM's guest forwards (src/providers/kvm/port-forward.ts). QEMU dials each
 * one once per domain start and carries the guest's connections to that guest address over the one
 * stream, one after another; when the host end closes the stream, what the guest sends until QEMU
 * has dialled again is lost. So a host end here never closes it: no idle, header or request
 * timeouts, keep-alive answers whatever the request asked (`Connection: close` from a guest
 * client included), and a lenient parser that reads the next request after such a one.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export type StreamHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** A server for one guest forward's stream: `handler` answers each request on it. */
export function guestStreamServer(handler: StreamHandler): Server {
  return createServer({ requestTimeout: 0, headersTimeout: 0, keepAliveTimeout: 0, insecureHTTPParser: true }, (req, res) => {
    res.shouldKeepAlive = true;
    handler(req, res);
  });
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer']);

function endToEnd(headers: IncomingMessage['headers']): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
  return out;
}

/**
 * A guest forward's host end that relays each request to `target()` (an `http://host:port` on this
 * machine, e.g. the orchestrator's API for the probe's echo), each on a connection of its own, and
 * answers with what came back (whole, with its length). The request's Host header is kept: the
 * target sees the address the guest asked for.
 */
export function guestStreamRelay(target: () => string): Server {
  return guestStreamServer((req, res) => {
    const url = new URL(req.url ?? '/', target());
    const upstream = request(
      { host: url.hostname, port: url.port, path: url.pathname + url.search, method: req.method, headers: endToEnd(req.headers), agent: false },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          const body = Buffer.concat(chunks);
          res.writeHead(answer.statusCode ?? 502, { ...endToEnd(answer.headers), 'content-length': String(body.length) }).end(body);
        });
        answer.on('error', () => res.writeHead(502, { 'content-length': '0' }).end());
      },
    );
    upstream.on('error', (err) => {
      const body = `relay: ${err.message}`;
      res.writeHead(502, { 'content-type': 'text/plain', 'content-length': String(Buffer.byteLength(body)) }).end(body);
    });
    req.pipe(upstream);
  });
}
