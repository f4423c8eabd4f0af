/**
 * Whole frames written one at a time, in order, honouring the Duplex's backpressure: once
 * `write` returns false nothing more is written until 'drain'. Frames not written yet can be
 * cancelled by tag (an aborted call that never left the process).
 *
 * Bounded: the bytes queued here plus those the stream still buffers may not pass `maxBytes`. A peer
 * that stops reading while it keeps sending (a PING flood: each PING owes a PONG) would otherwise grow
 * the queue without end; past the bound `onOverflow` hears a PeerNotReadingError (the connection
 * drops itself) and the queue fails.
 */
import type { Duplex } from 'node:stream';
import { PeerNotReadingError } from './errors.ts';

/** Default bound: a largest frame (32 MiB payload) plus room for the calls and PONGs queued behind it. */
export const DEFAULT_MAX_QUEUED_BYTES = 34 * 1024 * 1024;

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
  private queuedBytes = 0;

  constructor(
    private readonly stream: Duplex,
    private readonly maxBytes: number = DEFAULT_MAX_QUEUED_BYTES,
    private readonly onOverflow: (err: PeerNotReadingError) => void = () => undefined,
  ) {}

  /** Queues a frame; `onWritten` runs when it is handed to the stream. */
  push(buf: Buffer, tag?: number, onWritten?: () => void): void {
    if (this.failed || this.overflows(buf)) return;
    const entry: Entry = { buf };
    if (tag !== undefined) entry.tag = tag;
    if (onWritten) entry.onWritten = onWritten;
    this.enqueue(entry);
  }

  /** Queues a frame and resolves once it is written and the stream accepts more. */
  pushAndWait(buf: Buffer): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (this.overflows(buf)) return Promise.reject(this.failed ?? new Error('write queue full'));
    return new Promise<void>((resolve, reject) => {
      this.enqueue({ buf, done: resolve, failDone: reject });
    });
  }

  /** Removes a frame that has not been written yet; false when it already was. */
  cancel(tag: number): boolean {
    const i = this.entries.findIndex((e) => e.tag === tag);
    if (i < 0) return false;
    const [removed] = this.entries.splice(i, 1);
    this.queuedBytes -= removed?.buf.length ?? 0;
    return true;
  }

  /** Drops everything queued; waiters reject with `err`. */
  fail(err: Error): void {
    if (this.failed) return;
    this.failed = err;
    this.queuedBytes = 0;
    for (const e of [...this.entries.splice(0), ...this.drainWaiters.splice(0)]) e.failDone?.(err);
    this.stream.off('drain', this.onDrain);
  }

  /** True (and the queue failed, the owner told) when `buf` would pass the bound. */
  private overflows(buf: Buffer): boolean {
    const total = this.queuedBytes + this.stream.writableLength + buf.length;
    if (total <= this.maxBytes) return false;
    const err = new PeerNotReadingError(total, this.maxBytes);
    this.fail(err);
    this.onOverflow(err);
    return true;
  }

  private enqueue(entry: Entry): void {
    this.entries.push(entry);
    this.queuedBytes += entry.buf.length;
    this.flush();
  }

  private flush(): void {
    while (!this.waitingDrain && !this.failed && this.entries.length > 0) {
      const e = this.entries.shift()!;
      this.queuedBytes -= e.buf.length;
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
