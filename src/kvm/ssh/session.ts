/**
 * A ready SSH client and its lifetime: closure is reported once, with the first error seen
 * (keepalive timeout, socket error) or an SshClosedError when the link just ended.
 */
import { CloseLatch } from '../close-latch.ts';
import type { Client } from 'ssh2';
import { EgressError } from '../../errors.ts';

/** The SSH connection ended without an error of its own. */
export class SshClosedError extends EgressError {
  constructor(message: string) {
    super('ERR_KVM_SSH_CLOSED', message, { retryable: true });
  }
}

export class SshSession {
  readonly client: Client;
  private readonly latch = new CloseLatch();
  private lastError: Error | undefined;

  /** Takes over a client whose 'ready' has fired; `describe` names the peer in messages. */
  constructor(
    client: Client,
    readonly describe: string,
  ) {
    this.client = client;
    client.on('error', (err: Error) => {
      this.lastError ??= err;
    });
    client.on('close', () => this.finish(this.lastError ?? new SshClosedError(`SSH connection to ${describe} closed`)));
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
