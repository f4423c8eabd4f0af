import { connect, type Socket } from 'node:net';
import { answerSocket } from './answers.ts';
import { connectThroughHop } from './chain-connect.ts';
import type { ChainHop } from './chain-hop.ts';
import type { AuthorityTarget } from './request-target.ts';
import { relayReadsTo } from './tunnel-reads.ts';
import type { Admitted } from './types.ts';
import { upstreamFailure, upstreamTimeout, type UpstreamFailure } from './upstream-failure.ts';

/** A destination that does not accept the connection within this long is a 504. */
export const CONNECT_TIMEOUT_MS = 30_000;

const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

export interface TunnelContext {
  admitted: Admitted;
  localAddress?: string;
  family?: 4 | 6;
  /** Every socket of a tunnel while it lives (the proxy's close destroys them). */
  live: Set<Socket>;
  onFailure: (failure: UpstreamFailure, err: unknown) => void;
  /** The upstream proxy the tunnel goes through (issue 24), instead of connecting to the destination. */
  hop?: ChainHop;
  /**
   * Told once, when the tunnel ends (or could not be opened), the bytes it carried to the
   * destination and back: the payload, not the client's CONNECT or SOCKS5 exchange nor a hop's handshake.
   */
  onTraffic?: (sent: number, received: number) => void;
  /** How the client is told: HTTP's `200 Connection Established` and status answers by default; a SOCKS5 client gets its replies. */
  answers?: TunnelAnswers;
}

/** What a tunnel's client is sent once the destination is connected, or when it could not be. */
export interface TunnelAnswers {
  established: string | Buffer;
  failed(client: Socket, failure: UpstreamFailure): void;
}

const HTTP_ANSWERS: TunnelAnswers = {
  established: ESTABLISHED,
  failed: (client, failure) => answerSocket(client, failure.status, `The destination could not be reached: ${failure.kind}\n`),
};

/**
 * Connects an admitted CONNECT to its destination and relays bytes both ways, each side's end
 * passed on (half-close kept), either side's error or close ending both. Bytes the client sent
 * after its CONNECT head (`head`, a TLS hello sent without waiting) go first. `client` comes
 * paused (the server pauses it before admitting), so nothing it sends meanwhile is lost. The
 * destination's bytes reach the client through `relayReadsTo` (no chunk allocated per read).
 */
export function openTunnel(client: Socket, head: Buffer, target: AuthorityTarget, context: TunnelContext): void {
  if (context.hop) return openChainedTunnel(client, head, target, context, context.hop);
  const upstream: Socket = connect({
    host: target.connectHost,
    port: target.port,
    noDelay: true,
    // What the destination sends goes to the client from one buffer, read by read (tunnel-reads.ts).
    onread: relayReadsTo(client, () => upstream),
    ...(context.admitted.lookup ? { lookup: context.admitted.lookup } : {}),
    ...(context.localAddress ? { localAddress: context.localAddress, family: context.family } : {}),
  });
  context.live.add(client);
  context.live.add(upstream);
  let connected = false;
  upstream.setTimeout(CONNECT_TIMEOUT_MS, () => upstream.destroy(upstreamTimeout('connecting to the destination')));
  upstream.once('connect', () => {
    connected = true;
    upstream.setTimeout(0);
    client.setNoDelay(true);
    client.write((context.answers ?? HTTP_ANSWERS).established);
    if (head.length > 0) upstream.write(head);
    client.pipe(upstream);
  });
  // The destination's end (half-close) is passed on, as pipe() would.
  upstream.once('end', () => client.end());
  upstream.once('error', (err) => {
    if (connected) return void client.destroy();
    const failure = upstreamFailure(err);
    context.onFailure(failure, err);
    (context.answers ?? HTTP_ANSWERS).failed(client, failure);
  });
  client.once('error', () => upstream.destroy());
  client.once('close', () => {
    context.live.delete(client);
    upstream.destroy();
  });
  upstream.once('close', () => {
    context.live.delete(upstream);
    context.onTraffic?.(upstream.bytesWritten, upstream.bytesRead);
    if (connected) client.destroy();
  });
}

/**
 * The same through an upstream proxy: a CONNECT (or SOCKS5 CONNECT) through the hop to the
 * destination as the client named it (the hop resolves it), then the two sockets piped.
 */
function openChainedTunnel(client: Socket, head: Buffer, target: AuthorityTarget, context: TunnelContext, hop: ChainHop): void {
  context.live.add(client);
  let upstream: Socket | undefined;
  let clientGone = false;
  client.once('error', () => upstream?.destroy());
  client.once('close', () => {
    clientGone = true;
    context.live.delete(client);
    upstream?.destroy();
  });
  connectThroughHop(hop, target.connectHost, target.port, {
    timeoutMs: CONNECT_TIMEOUT_MS,
    ...(context.localAddress ? { localAddress: context.localAddress, family: context.family } : {}),
  }).then(
    (socket) => {
      if (clientGone) {
        context.onTraffic?.(0, 0);
        return void socket.destroy();
      }
      upstream = socket;
      context.live.add(socket);
      // The hop's handshake is not the tunnel's payload.
      const [handshakeSent, handshakeReceived] = [socket.bytesWritten, socket.bytesRead];
      socket.once('error', () => client.destroy());
      socket.once('close', () => {
        context.live.delete(socket);
        context.onTraffic?.(socket.bytesWritten - handshakeSent, socket.bytesRead - handshakeReceived);
        client.destroy();
      });
      client.setNoDelay(true);
      client.write((context.answers ?? HTTP_ANSWERS).established);
      if (head.length > 0) socket.write(head);
      socket.pipe(client);
      client.pipe(socket);
      socket.resume();
    },
    (err: unknown) => {
      const failure = upstreamFailure(err);
      context.onFailure(failure, err);
      context.onTraffic?.(0, 0);
      (context.answers ?? HTTP_ANSWERS).failed(client, failure);
    },
  );
}
