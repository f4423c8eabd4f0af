/**
 * The multiplexing core of a libvirt connection: serials, the in-flight cap, reply routing,
 * whole-frame writes with backpressure, keepalive answers, and teardown. Procedure encoding,
 * logging and metrics live one level up (connection-base.ts); this file moves bytes.
 */
import type { Duplex } from 'node:stream';
import { KEEPALIVE_PROC_PING, KEEPALIVE_PROC_PONG, KEEPALIVE_PROGRAM, MessageStatus, MessageType, REMOTE_PROGRAM } from './constants.ts';
import { ConnectionClosedError, ConnectionLostError, LibvirtAbortError, LibvirtProtocolError, StreamEndedError } from './errors.ts';
import { decodeRemoteError } from './remote-error.ts';
import { encodeFrame, FrameDecoder, type Frame } from './frame.ts';
import { KeepaliveMonitor } from './keepalive.ts';
import type { CallOptions, MessageListener, RpcCoreOptions, RpcStats, StreamHandler } from './rpc-types.ts';
import { WriteQueue } from './write-queue.ts';

interface Pending {
  kind: 'call';
  proc: number;
  name: string;
  serial: number;
  sent: boolean;
  opts: CallOptions;
  frameless: Buffer;
  resolve(payload: Buffer): void;
  reject(err: Error): void;
}

/** A call whose caller gave up; its serial is kept so that a late reply is dropped. */
interface Tombstone {
  kind: 'tombstone';
  name: string;
  onLateReply?: (status: number) => void;
}

export class RpcCore {
  private nextSerial = 1;
  private readonly queue: Pending[] = [];
  private readonly inFlight = new Map<number, Pending | Tombstone>();
  private readonly streams = new Map<number, StreamHandler>();
  private readonly messageListeners = new Map<string, Set<MessageListener>>();
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
    let tombstones = 0;
    for (const v of this.inFlight.values()) if (v.kind === 'tombstone') tombstones++;
    const { pingsSent, pingsAnswered, pongsReceived } = this;
    return { inFlight: this.inFlight.size, queued: this.queue.length, tombstones, streams: this.streams.size, pingsSent, pingsAnswered, pongsReceived };
  }

  /** Sends one CALL and resolves with the REPLY payload. */
  call(proc: number, name: string, payload: Buffer, signal: AbortSignal, opts: CallOptions = {}): Promise<Buffer> {
    if (signal.aborted) return Promise.reject(new LibvirtAbortError(name, signal.reason, false));
    if (this.reason) return Promise.reject(new ConnectionLostError(name, false, { cause: this.reason }));
    return new Promise<Buffer>((resolve, reject) => {
      const onAbort = (): void => this.abortCall(p, signal.reason);
      const p: Pending = {
        kind: 'call',
        proc,
        name,
        serial: 0,
        sent: false,
        opts,
        frameless: payload,
        resolve: (v) => {
          signal.removeEventListener('abort', onAbort);
          resolve(v);
        },
        reject: (e) => {
          signal.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
      signal.addEventListener('abort', onAbort, { once: true });
      if (opts.priority) this.send(p);
      else {
        this.queue.push(p);
        this.admit();
      }
    });
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
    this.streams.delete(serial);
  }

  /** Routes MESSAGE packets of `prog`/`proc` to `listener`; returns an unsubscribe function. */
  onMessage(prog: number, proc: number, listener: MessageListener): () => void {
    const key = `${prog}/${proc}`;
    let set = this.messageListeners.get(key);
    if (!set) this.messageListeners.set(key, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /** Calls `listener` once with the close reason (at once, asynchronously, when already closed). */
  onClose(listener: (reason: Error) => void): void {
    const reason = this.reason;
    if (reason) queueMicrotask(() => listener(reason));
    else this.closeListeners.push(listener);
  }

  /** Rejects every call that has not been written yet. */
  rejectQueued(reason: Error): void {
    for (const p of this.queue.splice(0)) p.reject(new ConnectionLostError(p.name, false, { cause: reason }));
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
    this.rejectQueued(reason);
    for (const [, entry] of this.inFlight) {
      if (entry.kind === 'call') entry.reject(new ConnectionLostError(entry.name, entry.sent, { cause: reason }));
    }
    this.inFlight.clear();
    for (const [, handler] of this.streams) handler.fail(new ConnectionLostError(handler.name, true, { cause: reason }));
    this.streams.clear();
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

  private admit(): void {
    while (this.queue.length > 0 && this.inFlight.size < this.options.maxInFlight && !this.reason) {
      this.send(this.queue.shift()!);
    }
  }

  private send(p: Pending): void {
    const serial = this.nextSerial;
    this.nextSerial = this.nextSerial >= 0xffff_ffff ? 1 : this.nextSerial + 1;
    p.serial = serial;
    if (p.opts.trace) p.opts.trace.serial = serial;
    this.inFlight.set(serial, p);
    if (p.opts.stream) this.streams.set(serial, p.opts.stream);
    const frame = encodeFrame({ prog: REMOTE_PROGRAM, proc: p.proc, type: MessageType.CALL, serial, status: MessageStatus.OK }, p.frameless);
    this.writes.push(frame, serial, () => {
      p.sent = true;
    });
  }

  private abortCall(p: Pending, reason: unknown): void {
    const queued = this.queue.indexOf(p);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      p.reject(new LibvirtAbortError(p.name, reason, false));
      return;
    }
    if (this.inFlight.get(p.serial) !== p) return;
    this.streams.delete(p.serial);
    if (!p.sent && this.writes.cancel(p.serial)) {
      this.inFlight.delete(p.serial);
      p.reject(new LibvirtAbortError(p.name, reason, false));
      this.admit();
      return;
    }
    // Sent: keep the serial (and its slot, the daemon still counts it) until the late reply.
    const tomb: Tombstone = { kind: 'tombstone', name: p.name };
    if (p.opts.stream) {
      tomb.onLateReply = (status) => {
        if (status === MessageStatus.OK) void this.sendStream(p.serial, p.proc, MessageStatus.ERROR).catch(() => undefined);
      };
    }
    this.inFlight.set(p.serial, tomb);
    p.reject(new LibvirtAbortError(p.name, reason, true));
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
      const set = this.messageListeners.get(`${f.prog}/${f.proc}`);
      for (const l of set ?? []) {
        try {
          l(f);
        } catch (err) {
          this.options.logger.error({ err, proc: f.proc }, 'libvirt message listener threw');
        }
      }
      return;
    }
    if (f.prog !== REMOTE_PROGRAM) return;
    if (f.type === MessageType.REPLY) this.onReply(f);
    else if (f.type === MessageType.STREAM) this.streams.get(f.serial)?.onPacket(f.status, f.payload);
  }

  private onReply(f: Frame): void {
    const entry = this.inFlight.get(f.serial);
    if (!entry) return; // unknown serial: dropped
    this.inFlight.delete(f.serial);
    if (entry.kind === 'tombstone') {
      this.options.logger.debug({ procedure: entry.name, serial: f.serial }, 'late libvirt reply dropped');
      entry.onLateReply?.(f.status);
    } else if (f.status === MessageStatus.OK) {
      entry.resolve(f.payload);
    } else {
      this.streams.delete(f.serial);
      entry.reject(this.decodeError(f.payload, entry));
    }
    this.admit();
  }

  decodeError(payload: Buffer, p: { proc: number; name: string; opts?: CallOptions }): Error {
    return decodeRemoteError(payload, p.proc, p.name, p.opts?.authenticated?.() ?? true);
  }

  private sendKeepalive(proc: number): void {
    if (this.reason) return;
    const frame = encodeFrame({ prog: KEEPALIVE_PROGRAM, proc, type: MessageType.MESSAGE, serial: 0, status: MessageStatus.OK });
    this.writes.push(frame);
  }
}
