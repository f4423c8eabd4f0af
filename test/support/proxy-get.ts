import { request, type IncomingMessage } from 'node:http';

/** What a plain GET through a forward proxy brought back. */
export interface ProxiedAnswer {
  status: number;
  body: string;
}

/**
 * A plain-HTTP GET of `url` through the forward proxy at `proxy` (host and port), as a crawler sends
 * it: the absolute URL as the request target and `Proxy-Authorization: Basic user:password`.
 * `proxy` may be a discovery URL (`http://user:pass@host:port`), whose credentials are used.
 */
export function getThroughProxy(proxy: string | { host?: string; port: number; username: string; password: string }, url: string): Promise<ProxiedAnswer> {
  const p =
    typeof proxy === 'string'
      ? (({ hostname, port, username, password }) => ({
          host: hostname,
          port: Number(port),
          username: decodeURIComponent(username),
          password: decodeURIComponent(password),
        }))(new URL(proxy))
      : proxy;
  const auth = Buffer.from(`${p.username}:${p.password}`).toString('base64');
  return new Promise((resolve, reject) => {
    const req = request(
      { host: p.host ?? '127.0.0.1', port: p.port, path: url, agent: false, headers: { host: new URL(url).host, 'proxy-authorization': `Basic ${auth}` } },
      (res: IncomingMessage) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.once('error', reject);
    req.end();
  });
}
