import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

/**
 * A TCP relay the chaos suite puts in front of a fake (the kube apiserver, the Compute API), so
 * that faults the fakes do not make on their own last for a while, without touching the fakes:
 * - `pass`: bytes flow both ways;
 * - `hang`: connections are accepted and kept, but no byte moves either way until the mode changes
 *   (a server that stopped answering);
 * - `cut`: every open connection is destroyed and new ones are reset at once (the network is down);
 * - `error`: open connections are destroyed; each new one gets, after its request's headers, an HTTP 500
 *   with `errorBody` and is closed (a server answering 500s).
 */
export type RelayMode = 'pass' | 'hang' | 'cut' | 'error';

export interface Relay {
  readonly port: number;
  readonly mode: RelayMode;
  setMode(mode: RelayMode): void;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream?: Socket;
  /** Chunks held while hanging, per direction. */
  held: { toUpstream: Buffer[]; toClient: Buffer[] };
}

export async function startRelay(targetPort: number, errorBody: string): Promise<Relay> {
  let mode: RelayMode = 'pass';
  const pairs = new Set<Pair>();
  /** Connections answered with 500s (not relayed), destroyed at close. */
  const answering = new Set<Socket>();
  const destroy = (p: Pair): void => {
    p.client.destroy();
    p.upstream?.destroy();
    pairs.delete(p);
  };
  const answer500 = (client: Socket): void => {
    answering.add(client);
    client.on('close', () => answering.delete(client));
    let head = '';
    client.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n') || client.writableEnded) return;
      const body = Buffer.from(errorBody);
      client.end(
        `HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${errorBody}`,
      );
    });
    client.on('error', () => undefined);
  };
  const server = createServer((client) => {
    if (mode === 'cut') {
      client.resetAndDestroy();
      return;
    }
    if (mode === 'error') {
      answer500(client);
      return;
    }
    const pair: Pair = { client, held: { toUpstream: [], toClient: [] } };
    pairs.add(pair);
    const upstream = connect(targetPort, '127.0.0.1');
    pair.upstream = upstream;
    client.on('data', (chunk: Buffer) => (mode === 'hang' ? pair.held.toUpstream.push(chunk) : upstream.write(chunk)));
    upstream.on('data', (chunk: Buffer) => (mode === 'hang' ? pair.held.toClient.push(chunk) : client.write(chunk)));
    const end = (): void => destroy(pair);
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    get mode() {
      return mode;
    },
    setMode(next) {
      const previous = mode;
      mode = next;
      if (next === 'cut' || next === 'error') for (const p of [...pairs]) destroy(p);
      if (previous === 'hang' && next === 'pass') {
        for (const p of pairs) {
          for (const c of p.held.toUpstream.splice(0)) p.upstream?.write(c);
          for (const c of p.held.toClient.splice(0)) p.client.write(c);
        }
      }
    },
    async close() {
      for (const p of [...pairs]) destroy(p);
      for (const s of answering) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
