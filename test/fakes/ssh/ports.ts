import { once } from 'node:events';
import net from 'node:net';

/** A 127.0.0.1 port that was free a moment ago and has nothing listening on it now. */
export async function closedPort(): Promise<number> {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}
