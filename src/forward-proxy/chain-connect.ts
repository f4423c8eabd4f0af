/**
 * Opens a connection to a destination through an upstream proxy (chain-hop.ts): an HTTP CONNECT
 * through an `http://` or `https://` hop, or a SOCKS5 CONNECT (RFC 1928) with username/password
 * authentication (RFC 1929) through a `socks5://` one. The socket it resolves with carries the
 * destination's bytes; what failed is an error whose `code` upstream-failure.ts maps.
 */
import { connect as netConnect, isIPv4, isIPv6, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { hopAuthorization, type ChainHop } from './chain-hop.ts';
import { HandshakeReader, PROXY_PROTOCOL } from './handshake-reader.ts';

/** The hop refused our credentials (HTTP 407, a SOCKS5 authentication failure). */
export const PROXY_AUTH = 'EPROXYAUTH';
/** The hop would not go on to the destination (an HTTP status other than 2xx, a SOCKS5 rule refusal). */
export const PROXY_REFUSED = 'EPROXYREFUSED';
/** The hop spoke something that is not the protocol. */
export { PROXY_PROTOCOL };

export interface ChainConnectOptions {
  localAddress?: string;
  family?: 4 | 6;
  /** The whole setup (connect, TLS, handshake) must finish within this long. */
  timeoutMs: number;
}

/** An error a hop's answer stands for, with the code upstream-failure.ts reads. */
export class ChainError extends Error {
  readonly code: string;
  /** The hop's HTTP status, when it answered with one. */
  readonly status: number | undefined;
  constructor(code: string, message: string, status?: number) {
    super(message);
    this.name = 'ChainError';
    this.code = code;
    this.status = status;
  }
}

/**
 * The code an HTTP hop's status stands for: 407 our credentials (401 too, as tinyproxy answers a
 * CONNECT with wrong credentials), 504 its own timeout, anything else a refusal.
 */
export function hopStatusCode(status: number): string {
  if (status === 407 || status === 401) return PROXY_AUTH;
  if (status === 504) return 'ETIMEDOUT';
  return PROXY_REFUSED;
}

/** Opens the transport to the hop itself: TCP, or TLS for `https://`. */
export function connectToHop(hop: ChainHop, options: Omit<ChainConnectOptions, 'timeoutMs'>): Socket {
  const source = options.localAddress ? { localAddress: options.localAddress, family: options.family } : {};
  if (hop.scheme === 'https') {
    return tlsConnect({
      host: hop.host,
      port: hop.port,
      servername: hop.servername ?? (isIPv4(hop.host) || isIPv6(hop.host) ? undefined : hop.host),
      ...(hop.ca ? { ca: hop.ca } : {}),
      ...source,
      ALPNProtocols: ['http/1.1'],
    });
  }
  return netConnect({ host: hop.host, port: hop.port, noDelay: true, ...source });
}

/** `host:port` as a CONNECT request target writes it (IPv6 in brackets). */
function authority(host: string, port: number): string {
  return `${isIPv6(host) ? `[${host}]` : host}:${port}`;
}

async function httpConnect(socket: Socket, reader: HandshakeReader, hop: ChainHop, host: string, port: number): Promise<void> {
  const target = authority(host, port);
  const auth = hopAuthorization(hop);
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`);
  const head = await reader.head();
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1];
  if (status === undefined) throw new ChainError(PROXY_PROTOCOL, `the upstream proxy answered CONNECT with "${head.split('\r\n')[0]?.slice(0, 100) ?? ''}"`);
  const code = Number(status);
  if (code < 200 || code > 299) throw new ChainError(hopStatusCode(code), `the upstream proxy answered CONNECT ${target} with HTTP ${code}`, code);
}

/** RFC 1928 reply codes: what each stands for here. */
const SOCKS_REPLIES: Record<number, { code: string; text: string }> = {
  1: { code: PROXY_REFUSED, text: 'general SOCKS server failure' },
  2: { code: PROXY_REFUSED, text: 'connection not allowed by ruleset' },
  3: { code: 'ENETUNREACH', text: 'network unreachable' },
  4: { code: 'EHOSTUNREACH', text: 'host unreachable' },
  5: { code: 'ECONNREFUSED', text: 'connection refused' },
  6: { code: 'ETIMEDOUT', text: 'TTL expired' },
  7: { code: PROXY_REFUSED, text: 'command not supported' },
  8: { code: PROXY_REFUSED, text: 'address type not supported' },
};

function socksAddress(host: string): Buffer {
  if (isIPv4(host)) return Buffer.from([1, ...host.split('.').map(Number)]);
  if (isIPv6(host)) {
    const groups = expandIPv6(host);
    const out = Buffer.alloc(17);
    out[0] = 4;
    groups.forEach((g, i) => out.writeUInt16BE(g, 1 + i * 2));
    return out;
  }
  const name = Buffer.from(host, 'utf8');
  if (name.length > 255) throw new ChainError(PROXY_PROTOCOL, 'a SOCKS5 destination name is at most 255 bytes');
  return Buffer.concat([Buffer.from([3, name.length]), name]);
}

function expandIPv6(address: string): number[] {
  let text = address;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)?.[1];
  if (v4 !== undefined) {
    const [a = 0, b = 0, c = 0, d = 0] = v4.split('.').map(Number);
    text = text.slice(0, -v4.length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [left = '', right] = text.split('::');
  const l = left === '' ? [] : left.split(':');
  const r = right === undefined || right === '' ? [] : right.split(':');
  const middle = right === undefined ? [] : Array.from({ length: 8 - l.length - r.length }, () => '0');
  return [...l, ...middle, ...r].map((g) => parseInt(g, 16));
}

async function socksConnect(socket: Socket, reader: HandshakeReader, hop: ChainHop, host: string, port: number): Promise<void> {
  const withAuth = hop.username !== undefined || hop.password !== undefined;
  socket.write(Buffer.from(withAuth ? [5, 1, 2] : [5, 1, 0]));
  const [version, method] = await reader.bytes(2);
  if (version !== 5) throw new ChainError(PROXY_PROTOCOL, 'the upstream proxy does not speak SOCKS5');
  if (method === 0xff) {
    throw new ChainError(
      withAuth ? PROXY_PROTOCOL : PROXY_AUTH,
      `the upstream SOCKS5 proxy accepts no ${withAuth ? 'username/password' : 'unauthenticated'} method`,
    );
  }
  if (method === 2) {
    if (!withAuth) throw new ChainError(PROXY_AUTH, 'the upstream SOCKS5 proxy requires a username and password');
    const user = Buffer.from(hop.username ?? '', 'utf8');
    const pass = Buffer.from(hop.password ?? '', 'utf8');
    if (user.length > 255 || pass.length > 255) throw new ChainError(PROXY_PROTOCOL, 'a SOCKS5 username and password are at most 255 bytes each');
    socket.write(Buffer.concat([Buffer.from([1, user.length]), user, Buffer.from([pass.length]), pass]));
    const [, status] = await reader.bytes(2);
    if (status !== 0) throw new ChainError(PROXY_AUTH, 'the upstream SOCKS5 proxy refused the username and password');
  } else if (method !== 0) {
    throw new ChainError(PROXY_PROTOCOL, `the upstream SOCKS5 proxy chose method ${method}, which was not offered`);
  }
  const portBytes = Buffer.alloc(2);
  portBytes.writeUInt16BE(port);
  socket.write(Buffer.concat([Buffer.from([5, 1, 0]), socksAddress(host), portBytes]));
  const [v, reply, , atyp] = await reader.bytes(4);
  if (v !== 5) throw new ChainError(PROXY_PROTOCOL, 'the upstream proxy answered the SOCKS5 request with another version');
  if (reply !== 0) {
    const known = SOCKS_REPLIES[reply ?? -1] ?? { code: PROXY_REFUSED, text: `reply ${reply}` };
    throw new ChainError(known.code, `the upstream SOCKS5 proxy could not connect to ${authority(host, port)}: ${known.text}`);
  }
  const rest = atyp === 1 ? 4 : atyp === 4 ? 16 : atyp === 3 ? ((await reader.bytes(1))[0] ?? 0) : -1;
  if (rest < 0) throw new ChainError(PROXY_PROTOCOL, `the upstream SOCKS5 proxy answered with address type ${atyp}`);
  await reader.bytes(rest + 2);
}

/**
 * A socket connected to `host:port` through `hop`, once the hop said it is. Rejects with the
 * connect error, a TLS error, a ChainError, or a timeout (ETIMEDOUT) after `timeoutMs`; the socket
 * is destroyed then. The socket comes paused: the caller pipes it.
 */
export function connectThroughHop(hop: ChainHop, host: string, port: number, options: ChainConnectOptions): Promise<Socket> {
  const socket = connectToHop(hop, options);
  return new Promise<Socket>((resolve, reject) => {
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      reject(err);
    };
    socket.setTimeout(options.timeoutMs, () =>
      fail(Object.assign(new Error(`the upstream proxy ${hop.host}:${hop.port} did not connect us within ${options.timeoutMs} ms`), { code: 'ETIMEDOUT' })),
    );
    socket.once('error', fail);
    socket.once(hop.scheme === 'https' ? 'secureConnect' : 'connect', () => {
      const reader = new HandshakeReader(socket);
      (hop.scheme === 'socks5' ? socksConnect(socket, reader, hop, host, port) : httpConnect(socket, reader, hop, host, port)).then(
        () => {
          if (settled) return;
          settled = true;
          reader.release();
          socket.setTimeout(0);
          socket.off('error', fail);
          resolve(socket);
        },
        (err: unknown) => fail(err as Error),
      );
    });
  });
}
