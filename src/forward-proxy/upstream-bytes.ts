import type { Socket } from 'node:net';

/** What each upstream connection had carried when its last request took its share (beside the socket: no new properties on it). */
const taken = new WeakMap<Socket, { sent: number; received: number }>();

/**
 * The bytes `socket` sent and received since they were last taken: a keep-alive connection carries
 * one request after another, each taking its own share when it ends (two numbers read, no listener
 * on its data). Taken at once after a hop's handshake, it leaves the handshake out.
 */
export function takeBytes(socket: Socket | null | undefined): [sent: number, received: number] {
  if (!socket) return [0, 0];
  const { bytesWritten, bytesRead } = socket;
  const before = taken.get(socket);
  if (!before) {
    taken.set(socket, { sent: bytesWritten, received: bytesRead });
    return [bytesWritten, bytesRead];
  }
  const share: [number, number] = [bytesWritten - before.sent, bytesRead - before.received];
  before.sent = bytesWritten;
  before.received = bytesRead;
  return share;
}
