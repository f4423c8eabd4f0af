/**
 * SOCKS5 on a forward proxy's own port (issue 24): a connection whose first byte is 5 speaks
 * SOCKS5 (RFC 1928), anything else goes to the HTTP server as before. Only username/password
 * authentication (RFC 1929) with the proxy's own credentials and only CONNECT are accepted; the
 * destination goes through the same `admit` as an HTTP CONNECT (credentials and egress policy)
 * and then the same tunnel, so the policy, the pinned resolution and a chained upstream apply alike.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { BasicCredentials } from './basic-credentials.ts';
import { HandshakeReader } from './handshake-reader.ts';
import type { AuthorityTarget } from './request-target.ts';
import type { TunnelAnswers } from './tunnel.ts';
import type { Admission, Admitted, Destination } from './types.ts';
import type { UpstreamFailure } from './upstream-failure.ts';

const VERSION = 5;
const USER_PASS = 2;
const NO_ACCEPTABLE = 0xff;
const CONNECT = 1;

/** RFC 1928 replies. */
const REPLY = {
  succeeded: 0,
  failure: 1,
  notAllowed: 2,
  networkUnreachable: 3,
  hostUnreachable: 4,
  refused: 5,
  ttlExpired: 6,
  commandNotSupported: 7,
  addressNotSupported: 8,
};

/** A reply with an all-zero IPv4 bound address (what we bind is none of the client's business). */
function reply(code: number): Buffer {
  return Buffer.from([VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0]);
}

function replyFor(failure: UpstreamFailure): number {
  switch (failure.kind) {
    case 'refused':
      return REPLY.refused;
    case 'unreachable':
    case 'unresolvable':
      return REPLY.hostUnreachable;
    case 'timeout':
      return REPLY.ttlExpired;
    case 'upstream-refused':
      return REPLY.notAllowed;
    default:
      return REPLY.failure;
  }
}

/** What SOCKS5 clients are told by a tunnel (tunnel.ts). */
export const SOCKS5_ANSWERS: TunnelAnswers = {
  established: reply(REPLY.succeeded),
  failed: (client, failure) => void client.end(reply(replyFor(failure))),
};

export interface Socks5Handling {
  /** Whether a user and password are this proxy's (RFC 1929's answer); `admit` still decides every CONNECT. */
  authenticate(username: string, password: string): boolean;
  admit(credentials: BasicCredentials, destination: Destination): Promise<Admission>;
  /** Opens the tunnel of an admitted CONNECT (tunnel.ts with SOCKS5_ANSWERS). */
  tunnel(client: Socket, target: AuthorityTarget, admitted: Admitted, destination: Destination): void;
  onError?: (err: unknown) => void;
}

/** The destination of a CONNECT request: IPv4, a name, or IPv6 (written in brackets, as the policy reads URL syntax). */
async function readDestination(reader: HandshakeReader, atyp: number | undefined): Promise<AuthorityTarget | undefined> {
  let connectHost: string;
  let hostname: string;
  if (atyp === 1) {
    connectHost = [...(await reader.bytes(4))].join('.');
    hostname = connectHost;
  } else if (atyp === 3) {
    const length = (await reader.bytes(1))[0] ?? 0;
    connectHost = (await reader.bytes(length)).toString('utf8');
    hostname = connectHost;
  } else if (atyp === 4) {
    const raw = await reader.bytes(16);
    const groups: string[] = [];
    for (let i = 0; i < 16; i += 2) groups.push(raw.readUInt16BE(i).toString(16));
    connectHost = groups.join(':');
    hostname = `[${connectHost}]`;
  } else return undefined;
  const port = (await reader.bytes(2)).readUInt16BE(0);
  return { hostname, connectHost, port };
}

async function negotiate(socket: Socket, handling: Socks5Handling): Promise<void> {
  const reader = new HandshakeReader(socket);
  const [, count = 0] = await reader.bytes(2);
  const methods = await reader.bytes(count);
  if (!methods.includes(USER_PASS)) {
    socket.end(Buffer.from([VERSION, NO_ACCEPTABLE]));
    return;
  }
  socket.write(Buffer.from([VERSION, USER_PASS]));
  const [, userLength = 0] = await reader.bytes(2);
  const username = (await reader.bytes(userLength)).toString('utf8');
  const [passLength = 0] = await reader.bytes(1);
  const password = (await reader.bytes(passLength)).toString('utf8');
  if (!handling.authenticate(username, password)) {
    socket.end(Buffer.from([1, 1]));
    return;
  }
  socket.write(Buffer.from([1, 0]));
  const [version, command, , atyp] = await reader.bytes(4);
  const target = await readDestination(reader, atyp);
  if (version !== VERSION || target === undefined) return void socket.end(reply(REPLY.addressNotSupported));
  if (command !== CONNECT) return void socket.end(reply(REPLY.commandNotSupported));
  const destination: Destination = { hostname: target.hostname, port: target.port };
  const admission = await handling.admit({ username, password }, destination);
  if (!admission.allowed) return void socket.end(reply(REPLY.notAllowed));
  reader.release();
  if (!socket.destroyed) handling.tunnel(socket, target, admission, destination);
}

/**
 * Puts SOCKS5 in front of `server`'s HTTP handling: its `connection` listeners (node's HTTP parser,
 * the proxy's own) run once the first byte says HTTP; a SOCKS5 connection is negotiated here. A
 * socket silent from the start is closed after `silentMs`.
 */
export function acceptSocks5(server: Server, handling: Socks5Handling, silentMs: number): void {
  const http = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    socket.on('error', () => socket.destroy());
    socket.setTimeout(silentMs, () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      if (first[0] !== VERSION) {
        for (const listener of http) listener.call(server, socket);
        socket.resume();
        return;
      }
      negotiate(socket, handling)
        .then(() => socket.setTimeout(0))
        .catch((err: unknown) => {
          socket.destroy();
          if ((err as { code?: unknown }).code !== 'EPROXYPROTO') handling.onError?.(err);
        });
      socket.resume();
    });
  });
}
