/**
 * Whole frames written one at a time, in order, honouring the Duplex's backpressure: once
 * `write` returns false nothing more is written until 'drain'. Frames not written yet can be
 * cancelled by tag (an aborted call that never left the process).
 */
import type { Duplex } from 'node:stream';

interface Entry {
  buf: Buffer;
  tag?: number;
  onWritten?: () => void;
  done?: () => void;
  failDone?: (err: Error) => void;
}

export class WriteQueue {
  private entries: Entry[] = [];
  private drainWaiters: Entry[] = [];
  private waitingDrain = false;
  private failed: Error | undefined;

  constructor(private readonly stream: Duplex) {}

  /** Queues a frame; `onWritten` runs when it is handed to the stream. */
  push(buf: Buffer, tag?: number, onWritten?: () => void): void {
    if (this.failed) return;
    const entry: Entry = { buf };
    if (tag !== undefined) entry.tag = tag;
    if (onWritten) entry.onWritten = onWritten;
    this.entries.push(entry);
    this.flush();
  }

  /** Queues a frame and resolves once it is written and the stream accepts more. */
  pushAndWait(buf: Buffer): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    return new Promise<void>((resolve, reject) => {
      this.entries.push({ buf, done: resolve, failDone: reject });
      this.flush();
    });
  }

  /** Removes a frame that has not been written yet; false when it already was. */
  cancel(tag: number): boolean {
    const i = this.entries.findIndex((e) => e.tag === tag);
    if (i < 0) return false;
    this.entries.splice(i, 1);
    return true;
  }

  /** Drops everything queued; waiters reject with `err`. */
  fail(err: Error): void {
    if (this.failed) return;
    this.failed = err;
    for (const e of [...this.entries.splice(0), ...this.drainWaiters.splice(0)]) e.failDone?.(err);
    this.stream.off('drain', this.onDrain);
  }

  private flush(): void {
    while (!this.waitingDrain && !this.failed && this.entries.length > 0) {
      const e = this.entries.shift()!;
      const ok = this.stream.write(e.buf);
      e.onWritten?.();
      if (ok) e.done?.();
      else {
        this.waitingDrain = true;
        this.drainWaiters.push(e);
        this.stream.once('drain', this.onDrain);
      }
    }
  }

  private readonly onDrain = (): void => {
    this.waitingDrain = false;
    for (const e of this.drainWaiters.splice(0)) e.done?.();
    this.flush();
  };
}
