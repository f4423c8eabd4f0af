import type { Socket } from 'node:net';

/** The peer spoke something that is not the protocol (chain-connect.ts maps it). */
export const PROXY_PROTOCOL = 'EPROXYPROTO';

/** A head larger than this is no proxy handshake. */
const MAX_HEAD_BYTES = 16 * 1024;

/** Reads exact byte counts (SOCKS) or up to a delimiter (an HTTP head) from a socket being set up. */
export class HandshakeReader {
  private buffered = Buffer.alloc(0);
  private waiting: (() => void) | undefined;
  private failure: Error | undefined;
  private readonly onData = (chunk: Buffer): void => {
    this.buffered = Buffer.concat([this.buffered, chunk]);
    this.waiting?.();
  };
  private readonly onEnd = (): void => {
    this.failure ??= Object.assign(new Error('the peer closed the connection during the handshake'), { code: PROXY_PROTOCOL });
    this.waiting?.();
  };

  constructor(private readonly socket: Socket) {
    socket.on('data', this.onData);
    socket.once('end', this.onEnd);
    // Destroyed mid-handshake (an error, a timeout): a read waiting for bytes ends too.
    socket.once('close', this.onEnd);
  }

  private async until(ready: () => boolean): Promise<void> {
    while (!ready()) {
      if (this.failure) throw this.failure;
      await new Promise<void>((resolve) => (this.waiting = resolve));
      this.waiting = undefined;
    }
  }

  async bytes(n: number): Promise<Buffer> {
    await this.until(() => this.buffered.length >= n);
    const out = this.buffered.subarray(0, n);
    this.buffered = this.buffered.subarray(n);
    return out;
  }

  async head(): Promise<string> {
    await this.until(() => {
      if (this.buffered.length > MAX_HEAD_BYTES) throw Object.assign(new Error(`a handshake head exceeds ${MAX_HEAD_BYTES} bytes`), { code: PROXY_PROTOCOL });
      return this.buffered.includes('\r\n\r\n');
    });
    const end = this.buffered.indexOf('\r\n\r\n') + 4;
    const text = this.buffered.subarray(0, end).toString('latin1');
    this.buffered = this.buffered.subarray(end);
    return text;
  }

  /** Stops reading; bytes that came after the handshake go back to the socket for whoever reads it next. */
  release(): void {
    this.socket.off('data', this.onData);
    this.socket.off('end', this.onEnd);
    this.socket.off('close', this.onEnd);
    this.socket.pause();
    if (this.buffered.length > 0) this.socket.unshift(this.buffered);
  }
}
