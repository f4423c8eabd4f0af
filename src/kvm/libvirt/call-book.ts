/**
 * The call bookkeeping of a libvirt connection: serials, the in-flight cap (calls past it wait in
 * order), the STREAM handler registered for a call's serial, replies routed back to their caller, and
 * calls given up: one not written yet is taken back; one written keeps its serial (and its slot, the
 * daemon still counts it) as a tombstone until its late reply, which is dropped.
 */
import type { Logger } from '../../logging.ts';
import { MessageStatus, MessageType, REMOTE_PROGRAM } from './constants.ts';
import { ConnectionLostError, LibvirtAbortError } from './errors.ts';
import { encodeFrame, type Frame } from './frame.ts';
import { decodeRemoteError } from './remote-error.ts';
import type { CallOptions, StreamHandler } from './rpc-types.ts';
import type { WriteQueue } from './write-queue.ts';

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

/** The error a failed REPLY (or a stream's error packet) carries, as the caller sees it. */
export function callError(payload: Buffer, p: { proc: number; name: string; opts?: CallOptions }): Error {
  return decodeRemoteError(payload, p.proc, p.name, p.opts?.authenticated?.() ?? true);
}

export interface CallBookOptions {
  maxInFlight: number;
  logger: Logger;
  /** Where CALL frames are written (tagged with their serial, so that one not written yet can be taken back). */
  writes: WriteQueue;
  /** Ends the stream of a call given up whose late reply opened it (an error STREAM packet). */
  abortStream(serial: number, proc: number): void;
}

export class CallBook {
  private nextSerial = 1;
  private readonly queue: Pending[] = [];
  private readonly inFlight = new Map<number, Pending | Tombstone>();
  private readonly streams = new Map<number, StreamHandler>();
  private failed = false;

  constructor(private readonly options: CallBookOptions) {}

  counts(): { inFlight: number; queued: number; tombstones: number; streams: number } {
    let tombstones = 0;
    for (const v of this.inFlight.values()) if (v.kind === 'tombstone') tombstones++;
    return { inFlight: this.inFlight.size, queued: this.queue.length, tombstones, streams: this.streams.size };
  }

  /** Sends one CALL (now with `opts.priority`, else once under the in-flight cap) and resolves with the REPLY payload. */
  call(proc: number, name: string, payload: Buffer, signal: AbortSignal, opts: CallOptions): Promise<Buffer> {
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

  /** Routes a STREAM packet to the handler of its call (none: dropped). */
  streamPacket(f: Frame): void {
    this.streams.get(f.serial)?.onPacket(f.status, f.payload);
  }

  /** Stops routing STREAM packets of `serial` (later ones are dropped). */
  dropStream(serial: number): void {
    this.streams.delete(serial);
  }

  /** Settles the call a REPLY answers (an unknown serial is dropped), then admits the next queued call. */
  reply(f: Frame): void {
    const entry = this.inFlight.get(f.serial);
    if (!entry) return;
    this.inFlight.delete(f.serial);
    if (entry.kind === 'tombstone') {
      this.options.logger.debug({ procedure: entry.name, serial: f.serial }, 'late libvirt reply dropped');
      entry.onLateReply?.(f.status);
    } else if (f.status === MessageStatus.OK) {
      entry.resolve(f.payload);
    } else {
      this.streams.delete(f.serial);
      entry.reject(callError(f.payload, entry));
    }
    this.admit();
  }

  /** Rejects every call that has not been written yet. */
  rejectQueued(reason: Error): void {
    for (const p of this.queue.splice(0)) p.reject(new ConnectionLostError(p.name, false, { cause: reason }));
  }

  /** The connection is gone: every call and stream fails with `reason`, and nothing is admitted any more. */
  failAll(reason: Error): void {
    this.failed = true;
    this.rejectQueued(reason);
    for (const [, entry] of this.inFlight) {
      if (entry.kind === 'call') entry.reject(new ConnectionLostError(entry.name, entry.sent, { cause: reason }));
    }
    this.inFlight.clear();
    for (const [, handler] of this.streams) handler.fail(new ConnectionLostError(handler.name, true, { cause: reason }));
    this.streams.clear();
  }

  private admit(): void {
    while (this.queue.length > 0 && this.inFlight.size < this.options.maxInFlight && !this.failed) {
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
    this.options.writes.push(frame, serial, () => {
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
    if (!p.sent && this.options.writes.cancel(p.serial)) {
      this.inFlight.delete(p.serial);
      p.reject(new LibvirtAbortError(p.name, reason, false));
      this.admit();
      return;
    }
    // Sent: keep the serial (and its slot, the daemon still counts it) until the late reply.
    const tomb: Tombstone = { kind: 'tombstone', name: p.name };
    if (p.opts.stream) {
      tomb.onLateReply = (status) => {
        if (status === MessageStatus.OK) this.options.abortStream(p.serial, p.proc);
      };
    }
    this.inFlight.set(p.serial, tomb);
    p.reject(new LibvirtAbortError(p.name, reason, true));
  }
}
