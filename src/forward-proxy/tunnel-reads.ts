import type { OnReadOpts, Socket } from 'node:net';

/** What one read of a tunnel's destination may carry: the size libuv gives a stream's read by default. */
export const TUNNEL_READ_BYTES = 64 * 1024;

/**
 * The `onread` option for a tunnel's destination socket, relaying what it reads to `client` without
 * the stream machinery `pipe()` runs per chunk. Every read lands in one buffer the tunnel keeps and
 * is written to the client at once. A write the kernel took whole leaves the buffer free for the
 * next read. A write it did not finish still points into the buffer, so reading stops (the callback
 * answers false) until the client drains, and the buffer is never overwritten under a pending write.
 * Measured in docs/benchmarks.md: a 1 GiB download through one tunnel at 0.83× direct instead of
 * 0.50× in the data-plane bench, with about 40 % less of the relay's CPU per GiB.
 *
 * `destination` is asked for the socket when a pause ends (it does not exist yet when this is made).
 */
export function relayReadsTo(client: Socket, destination: () => Socket): OnReadOpts {
  const resume = (): void => void destination().resume();
  return {
    buffer: Buffer.allocUnsafe(TUNNEL_READ_BYTES),
    callback(bytes: number, buffer: Uint8Array): boolean {
      if (client.destroyed) return false;
      if (client.write(buffer.subarray(0, bytes))) return true;
      client.once('drain', resume);
      return false;
    },
  };
}
