/**
 * A ready SSH client and its lifetime: closure is reported once, with the first error seen
 * (keepalive timeout, socket error) or an SshClosedError when the link just ended.
 *
 * Bounded: ssh2 writes to its socket without regard to backpressure, and a peer may grant an
 * unbounded channel window, so what the peer makes us send (PONGs, channel replies) would pile up in
 * the socket's buffer if it stopped reading. After each chunk the peer sends, the bytes the socket has
 * not written yet are compared with the bound; past it the session is destroyed with an
 * SshPeerNotReadingError.
 */
import type { Socket } from 'node:net';
import { CloseLatch } from '../close-latch.ts';
import type { Client } from 'ssh2';
import { EgressError } from '../../errors.ts';

/** The SSH connection ended without an error of its own. */
export class SshClosedError extends EgressError {
  constructor(message: string) {
    super('ERR_KVM_SSH_CLOSED', message, { retryable: true });
  }
}

/** The peer stopped reading while it kept making us write: the socket's unwritten bytes passed the bound. */
export class SshPeerNotReadingError extends EgressError {
  readonly unwrittenBytes: number;
  constructor(describe: string, unwrittenBytes: number, bound: number) {
    super(
      'ERR_KVM_SSH_PEER_NOT_READING',
      `SSH peer ${describe} stopped reading: ${unwrittenBytes} bytes waiting to be written to the socket (bound ${bound}); connection dropped`,
      { retryable: true },
    );
    this.unwrittenBytes = unwrittenBytes;
  }
}

/** The socket under the client and the most it may hold unwritten. */
export interface SshWriteBound {
  socket: Socket;
  maxUnwrittenBytes: number;
}

export class SshSession {
  readonly client: Client;
  private readonly latch = new CloseLatch();
  private lastError: Error | undefined;

  /** Takes over a client whose 'ready' has fired; `describe` names the peer in messages. */
  constructor(
    client: Client,
    readonly describe: string,
    bound?: SshWriteBound,
  ) {
    this.client = client;
    client.on('error', (err: Error) => {
      this.lastError ??= err;
    });
    client.on('close', () => this.finish(this.lastError ?? new SshClosedError(`SSH connection to ${describe} closed`)));
    if (bound) this.watchUnwritten(bound);
  }

  /** Checks after each chunk from the peer (ssh2 has handled it by then: its listener came first). */
  private watchUnwritten({ socket, maxUnwrittenBytes }: SshWriteBound): void {
    const check = (): void => {
      const unwritten = socket.writableLength;
      if (unwritten <= maxUnwrittenBytes || this.latch.closed) return;
      const err = new SshPeerNotReadingError(this.describe, unwritten, maxUnwrittenBytes);
      this.lastError = err;
      this.finish(err);
      this.client.destroy();
      socket.destroy();
    };
    socket.on('data', check);
    this.latch.onClose(() => socket.off('data', check));
  }

  get closed(): boolean {
    return this.latch.closed;
  }

  get closeReason(): Error | undefined {
    return this.latch.reason;
  }

  /** `listener` hears the close reason once (asynchronously at once when already closed). */
  onClose(listener: (reason: Error) => void): void {
    this.latch.onClose(listener);
  }

  /** Polite close (SSH DISCONNECT, then end of socket). */
  end(): void {
    if (this.latch.closed) return;
    this.client.end();
  }

  /** Immediate teardown of the socket. */
  destroy(err?: Error): void {
    if (err) this.lastError ??= err;
    this.client.destroy();
    // ssh2 skips destroy when the socket is no longer writable; 'close' still follows, but make
    // sure listeners hear about it even if it already happened.
    if (!this.latch.closed && err) queueMicrotask(() => this.finish(err));
  }

  private finish(reason: Error): void {
    this.latch.close(reason);
  }
}
