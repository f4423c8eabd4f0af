/**
 * The multiplexing core of a libvirt connection: the transport (frames read and dispatched, whole
 * frames written with backpressure, write-queue.ts), keepalive answers, and teardown. Serials, the
 * in-flight cap and reply routing are the call book's (call-book.ts); MESSAGE listeners are
 * message-listeners.ts. Procedure encoding, logging and metrics live one level up
 * (connection-base.ts); this file moves bytes.
 */
import type { Duplex } from 'node:stream';
import { KEEPALIVE_PROC_PING, KEEPALIVE_PROC_PONG, KEEPALIVE_PROGRAM, MessageStatus, MessageType, REMOTE_PROGRAM } from './constants.ts';
import { CallBook, callError } from './call-book.ts';
import { ConnectionClosedError, ConnectionLostError, LibvirtAbortError, LibvirtProtocolError, StreamEndedError } from './errors.ts';
import { encodeFrame, FrameDecoder, type Frame } from './frame.ts';
import { KeepaliveMonitor } from './keepalive.ts';
import { MessageListeners } from './message-listeners.ts';
import type { CallOptions, MessageListener, RpcCoreOptions, RpcStats } from './rpc-types.ts';
import { WriteQueue } from './write-queue.ts';

export class RpcCore {
  private readonly calls: CallBook;
  private readonly messageListeners = new MessageListeners();
  private readonly closeListeners: ((reason: Error) => void)[] = [];
  private readonly decoder = new FrameDecoder();
  private readonly writes: WriteQueue;
  private readonly keepalive: KeepaliveMonitor | undefined;
  private reason: Error | undefined;
  private pingsSent = 0;
  private pingsAnswered = 0;
  private pongsReceived = 0;
  /** Set by a client close: a peer EOF is then the expected end, not a loss. */
  closingByClient = false;

  constructor(
    readonly stream: Duplex,
    private readonly options: RpcCoreOptions,
  ) {
    this.writes = new WriteQueue(stream, options.maxQueuedBytes, (err) => this.fail(err));
    this.calls = new CallBook({
      maxInFlight: options.maxInFlight,
      logger: options.logger,
      writes: this.writes,
      abortStream: (serial, proc) => void this.sendStream(serial, proc, MessageStatus.ERROR).catch(() => undefined),
    });
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.on('end', () => this.onEnd());
    stream.on('error', (err) => this.fail(new StreamEndedError('libvirt stream failed', { cause: err })));
    stream.on('close', () => this.onEnd());
    if (options.keepalive) {
      this.keepalive = new KeepaliveMonitor(
        options.keepalive,
        () => {
          this.pingsSent++;
          this.sendKeepalive(KEEPALIVE_PROC_PING);
        },
        (err) => this.fail(err),
      );
      this.keepalive.start();
    }
  }

  get closed(): boolean {
    return this.reason !== undefined;
  }

  get closeReason(): Error | undefined {
    return this.reason;
  }

  stats(): RpcStats {
    const { pingsSent, pingsAnswered, pongsReceived } = this;
    return { ...this.calls.counts(), pingsSent, pingsAnswered, pongsReceived };
  }

  /** Sends one CALL and resolves with the REPLY payload. */
  call(proc: number, name: string, payload: Buffer, signal: AbortSignal, opts: CallOptions = {}): Promise<Buffer> {
    if (signal.aborted) return Promise.reject(new LibvirtAbortError(name, signal.reason, false));
    if (this.reason) return Promise.reject(new ConnectionLostError(name, false, { cause: this.reason }));
    return this.calls.call(proc, name, payload, signal, opts);
  }

  /** Writes a STREAM packet for `serial`; resolves once the transport accepts more data. */
  sendStream(serial: number, proc: number, status: number, payload?: Uint8Array): Promise<void> {
    if (this.reason) return Promise.reject(new ConnectionLostError('stream', true, { cause: this.reason }));
    const frame = encodeFrame({ prog: REMOTE_PROGRAM, proc, type: MessageType.STREAM, serial, status }, payload);
    return this.writes.pushAndWait(frame);
  }

  /** Stops reading the transport (read-stream flow control); keepalive verdicts are suspended meanwhile. */
  pauseReading(): void {
    this.keepalive?.suspend();
    this.stream.pause();
  }

  resumeReading(): void {
    this.keepalive?.resume();
    if (!this.reason) this.stream.resume();
  }

  /** Stops routing STREAM packets of `serial` (later ones are dropped). */
  dropStream(serial: number): void {
    this.calls.dropStream(serial);
  }

  /** Routes MESSAGE packets of `prog`/`proc` to `listener`; returns an unsubscribe function. */
  onMessage(prog: number, proc: number, listener: MessageListener): () => void {
    return this.messageListeners.add(prog, proc, listener);
  }

  /** Calls `listener` once with the close reason (at once, asynchronously, when already closed). */
  onClose(listener: (reason: Error) => void): void {
    const reason = this.reason;
    if (reason) queueMicrotask(() => listener(reason));
    else this.closeListeners.push(listener);
  }

  /** Rejects every call that has not been written yet. */
  rejectQueued(reason: Error): void {
    this.calls.rejectQueued(reason);
  }

  /** Half-closes the stream and waits (bounded) for the peer to close, then tears down. */
  async shutdown(waitMs: number): Promise<void> {
    this.closingByClient = true;
    if (!this.reason) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        timer.unref();
        this.stream.once('close', () => {
          clearTimeout(timer);
          resolve();
        });
        this.stream.end();
      });
    }
    this.fail(new ConnectionClosedError());
  }

  /** Tears the connection down: every pending call and stream fails, listeners hear `reason` once. */
  fail(reason: Error): void {
    if (this.reason) return;
    this.reason = reason;
    this.keepalive?.stop();
    this.writes.fail(reason);
    this.calls.failAll(reason);
    this.stream.on('error', () => undefined);
    this.stream.destroy();
    const level = reason instanceof ConnectionClosedError ? 'debug' : 'warn';
    this.options.logger[level]({ err: reason }, 'libvirt connection closed');
    for (const l of this.closeListeners.splice(0)) {
      try {
        l(reason);
      } catch (err) {
        this.options.logger.error({ err }, 'libvirt close listener threw');
      }
    }
  }

  private onData(chunk: Buffer): void {
    if (this.reason) return;
    this.keepalive?.touch();
    let frames: Frame[];
    try {
      frames = this.decoder.push(chunk);
    } catch (err) {
      this.fail(err instanceof Error ? err : new LibvirtProtocolError('bad frame', { cause: err }));
      return;
    }
    for (const f of frames) {
      if (this.reason) return;
      this.dispatch(f);
    }
  }

  private onEnd(): void {
    if (this.reason) return;
    if (this.closingByClient) this.fail(new ConnectionClosedError());
    else if (this.decoder.pending > 0) {
      this.fail(new LibvirtProtocolError(`stream ended inside a frame (${this.decoder.pending} bytes buffered)`));
    } else this.fail(new StreamEndedError('libvirt peer closed the connection'));
  }

  private dispatch(f: Frame): void {
    if (f.type === MessageType.MESSAGE) {
      if (f.prog === KEEPALIVE_PROGRAM) {
        if (f.proc === KEEPALIVE_PROC_PING) {
          this.pingsAnswered++;
          this.sendKeepalive(KEEPALIVE_PROC_PONG);
        } else if (f.proc === KEEPALIVE_PROC_PONG) {
          this.pongsReceived++;
        }
        return;
      }
      this.messageListeners.deliver(f, this.options.logger);
      return;
    }
    if (f.prog !== REMOTE_PROGRAM) return;
    if (f.type === MessageType.REPLY) this.calls.reply(f);
    else if (f.type === MessageType.STREAM) this.calls.streamPacket(f);
  }

  /** The error a stream's error packet carries, as the caller sees it. */
  decodeError(payload: Buffer, p: { proc: number; name: string; opts?: CallOptions }): Error {
    return callError(payload, p);
  }

  private sendKeepalive(proc: number): void {
    if (this.reason) return;
    const frame = encodeFrame({ prog: KEEPALIVE_PROGRAM, proc, type: MessageType.MESSAGE, serial: 0, status: MessageStatus.OK });
    this.writes.push(frame);
  }
}
