/**
 * One client connection of the fake daemon: framing, auth/open sequencing, serial echo, the
 * max_client_requests stall, keepalive, streams and the reply-side fault knobs.
 */
import type { Duplex } from 'node:stream';
import { remoteError, remoteErrorCodec } from '../../../src/kvm/libvirt/codecs.ts';
import {
  ErrorCode,
  ErrorDomain,
  KEEPALIVE_PROC_PING,
  KEEPALIVE_PROC_PONG,
  KEEPALIVE_PROGRAM,
  MessageStatus,
  MessageType,
  Proc,
  REMOTE_PROGRAM,
  STREAM_CHUNK_MAX,
} from '../../../src/kvm/libvirt/constants.ts';
import type { RemoteError } from '../../../src/kvm/libvirt/errors.ts';
import { encodeFrame, FrameDecoder, type Frame } from '../../../src/kvm/libvirt/frame.ts';
import { lifecycleEventCodec } from '../../../src/kvm/libvirt/procedures.ts';
import { decodeXdr, encodeXdr } from '../../../src/kvm/libvirt/xdr.ts';
import { AUTH_PROCS, fakeProcedure, type HandlerContext } from './handlers.ts';
import { FakeFault, type FakeDomain, type FakeVolume } from './model.ts';
import type { FakeLibvirtServer } from './server.ts';

interface UploadState {
  vol: FakeVolume;
  offset: number;
  length: number;
  chunks: Buffer[];
  bytes: number;
  maxPacket: number;
  failAfter: number | undefined;
}

/** Procedures allowed after auth but before CONNECT_OPEN. */
const BEFORE_OPEN = new Set<number>([Proc.CONNECT_OPEN, Proc.CONNECT_CLOSE, Proc.CONNECT_SUPPORTS_FEATURE]);

export class FakeSession {
  authed = false;
  opened = false;
  uri: string | null = null;
  /** CALLs received and not yet answered. */
  inFlight = 0;
  /** True while reading is stopped because `inFlight` reached maxClientRequests. */
  stalled = false;
  /** When true the session reads but never answers anything (a dead peer). */
  silent = false;
  /** Set by `stopReading()`: the stall logic never resumes reading. */
  deaf = false;
  pongsReceived = 0;
  pingsReceived = 0;
  closed = false;
  readonly uploads = new Map<number, UploadState>();
  /** Download serials waiting for the client's STREAM/OK after EOF (or its abort). */
  readonly downloads = new Set<number>();
  private readonly decoder = new FrameDecoder();
  private readonly backlog: Frame[] = [];
  private readonly eventCallbacks = new Set<number>();
  private pingTimer: NodeJS.Timeout | undefined;
  private unansweredPings = 0;
  private lastRx = Date.now();

  constructor(
    readonly id: number,
    readonly stream: Duplex,
    private readonly server: FakeLibvirtServer,
  ) {
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.on('error', () => this.close());
    stream.on('close', () => this.close());
    stream.on('end', () => this.close());
  }

  /** Abrupt close (calls in flight are lost). */
  destroy(): void {
    this.stream.destroy();
    this.close();
  }

  /** Writes raw bytes (truncated or oversize frames). */
  writeRaw(buf: Buffer): void {
    if (!this.closed) this.stream.write(buf);
  }

  /** Stops reading the connection for good (a peer that never reads), while it may go on writing. */
  stopReading(): void {
    this.deaf = true;
    this.stream.pause();
  }

  /** Sends `n` PINGs at once. */
  pingFlood(n: number): void {
    for (let i = 0; i < n; i++) this.sendKeepalive(KEEPALIVE_PROC_PING);
  }

  /** Pushes a MESSAGE packet (events are sent with serial 1 by libvirtd). */
  sendMessage(proc: number, payload: Buffer, serial = 1): void {
    this.send(encodeFrame({ prog: REMOTE_PROGRAM, proc, type: MessageType.MESSAGE, serial, status: MessageStatus.OK }, payload));
  }

  lifecycle(dom: FakeDomain, event: number, detail: number): void {
    for (const callbackId of this.eventCallbacks) {
      const payload = encodeXdr({ callbackId, dom: { name: dom.name, uuid: dom.uuid, id: dom.id }, event, detail }, lifecycleEventCodec.write);
      this.sendMessage(Proc.DOMAIN_EVENT_CALLBACK_LIFECYCLE, payload);
    }
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.server.sessionClosed(this);
  }

  private send(frame: Buffer): void {
    if (!this.closed && !this.stream.destroyed) this.stream.write(frame);
  }

  private sendKeepalive(proc: number): void {
    this.send(encodeFrame({ prog: KEEPALIVE_PROGRAM, proc, type: MessageType.MESSAGE, serial: 0, status: MessageStatus.OK }));
  }

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    let frames: Frame[];
    try {
      frames = this.decoder.push(chunk);
    } catch {
      this.destroy();
      return;
    }
    this.backlog.push(...frames);
    this.drain();
  }

  /** Processes frames until maxClientRequests calls are in flight, then stops reading. */
  private drain(): void {
    const max = this.server.options.maxClientRequests;
    while (this.backlog.length > 0 && this.inFlight < max && !this.closed) this.handle(this.backlog.shift()!);
    const stall = this.backlog.length > 0;
    if (stall && !this.stalled) this.stream.pause();
    if (!stall && this.stalled && !this.deaf) this.stream.resume();
    this.stalled = stall;
  }

  private handle(f: Frame): void {
    this.lastRx = Date.now();
    this.unansweredPings = 0;
    if (this.silent || this.server.faults.silent) return;
    if (f.prog === KEEPALIVE_PROGRAM && f.type === MessageType.MESSAGE) {
      if (f.proc === KEEPALIVE_PROC_PING) {
        this.pingsReceived++;
        this.sendKeepalive(KEEPALIVE_PROC_PONG);
      } else if (f.proc === KEEPALIVE_PROC_PONG) this.pongsReceived++;
      return;
    }
    if (f.prog !== REMOTE_PROGRAM) return;
    if (f.type === MessageType.CALL) this.handleCall(f);
    else if (f.type === MessageType.STREAM) this.handleStream(f);
  }

  private handleCall(f: Frame): void {
    this.inFlight++;
    const proc = fakeProcedure(f.proc);
    const name = proc?.name ?? `proc_${f.proc}`;
    let after: (() => void) | undefined;
    let status: number = MessageStatus.OK;
    let payload: Buffer;
    try {
      if (!proc) throw new FakeFault(remoteError(ErrorCode.RPC, ErrorDomain.RPC, `unknown procedure: ${f.proc}`));
      let args: unknown;
      try {
        args = decodeXdr(f.payload, proc.args.read);
      } catch {
        throw new FakeFault(remoteError(ErrorCode.RPC, ErrorDomain.RPC, 'Unable to decode message payload'));
      }
      this.server.recordRequest({ session: this.id, serial: f.serial, proc: f.proc, name, args });
      const injected = this.server.faults.takeError(name);
      if (injected) throw new FakeFault(injected);
      let result: unknown;
      if (AUTH_PROCS.has(f.proc)) result = this.auth(f.proc);
      else {
        if (!this.authed) throw new FakeFault(remoteError(ErrorCode.RPC, ErrorDomain.RPC, 'authentication required'));
        if (!this.opened && !BEFORE_OPEN.has(f.proc)) {
          throw new FakeFault(remoteError(ErrorCode.INTERNAL_ERROR, ErrorDomain.RPC, 'internal error: hypervisor connection not open'));
        }
        const ctx = this.context(f.serial, (fn) => (after = fn));
        result = proc.handle(ctx, args);
      }
      payload = encodeXdr(result, proc.ret.write);
    } catch (err) {
      // A bug in a handler answers as an internal error instead of crashing the test process.
      const remote =
        err instanceof FakeFault ? err.remote : remoteError(ErrorCode.INTERNAL_ERROR, ErrorDomain.RPC, `internal error: fake handler threw: ${String(err)}`);
      status = MessageStatus.ERROR;
      payload = encodeXdr(remote, remoteErrorCodec.write);
      after = undefined;
    }
    payload = this.server.faults.rewrite(name, payload);
    const frame =
      this.server.faults.takeRawReply(name, f.serial) ??
      encodeFrame({ prog: REMOTE_PROGRAM, proc: f.proc, type: MessageType.REPLY, serial: f.serial, status }, payload);
    const deliver = (): void => {
      if (this.closed) return;
      this.send(frame);
      this.inFlight--;
      after?.();
      this.drain();
    };
    this.server.faults.schedule(name, deliver);
  }

  private auth(proc: number): unknown {
    const types = this.server.options.authTypes;
    if (proc === Proc.AUTH_LIST) {
      if (types.length === 0 || types.includes(0)) this.authed = true;
      return types;
    }
    if (proc === Proc.AUTH_POLKIT && types.includes(2) && this.server.options.polkitAllowed) {
      this.authed = true;
      return 1;
    }
    throw new FakeFault(remoteError(ErrorCode.AUTH_FAILED, ErrorDomain.RPC, 'authentication failed: access denied by policy'));
  }

  private context(serial: number, setAfter: (fn: () => void) => void): HandlerContext {
    return {
      state: this.server.state,
      serial,
      hostname: this.server.options.hostname,
      startUpload: (vol, offset, length) => {
        this.uploads.set(serial, { vol, offset, length, chunks: [], bytes: 0, maxPacket: 0, failAfter: this.server.faults.takeUploadFailure() });
      },
      startDownload: (vol, offset, length) => setAfter(() => this.download(serial, vol, offset, length)),
      registerEvents: () => {
        const id = this.server.nextCallbackId++;
        this.eventCallbacks.add(id);
        return id;
      },
      deregisterEvents: (id) => void this.eventCallbacks.delete(id),
      closeAfterReply: () => setAfter(() => this.stream.end()),
      startServerPings: () => this.startServerPings(),
      open: (uri) => {
        this.opened = true;
        this.uri = uri;
      },
    };
  }

  private streamFrame(serial: number, proc: number, status: number, payload?: Buffer): Buffer {
    return encodeFrame({ prog: REMOTE_PROGRAM, proc, type: MessageType.STREAM, serial, status }, payload);
  }

  private handleStream(f: Frame): void {
    if (this.downloads.delete(f.serial)) {
      // The client's STREAM/OK after EOF (finish) or STREAM/ERROR (abort): confirm with STREAM/OK.
      this.send(this.streamFrame(f.serial, f.proc, MessageStatus.OK));
      return;
    }
    const up = this.uploads.get(f.serial);
    if (!up) return;
    if (f.status === MessageStatus.CONTINUE) {
      up.bytes += f.payload.length;
      up.maxPacket = Math.max(up.maxPacket, f.payload.length);
      if ((up.length > 0 && up.bytes > up.length) || (up.failAfter !== undefined && up.bytes > up.failAfter)) {
        this.uploads.delete(f.serial);
        const err: RemoteError = remoteError(ErrorCode.SYSTEM_ERROR, ErrorDomain.STREAMS, 'cannot write to stream: No space left on device');
        this.send(this.streamFrame(f.serial, f.proc, MessageStatus.ERROR, encodeXdr(err, remoteErrorCodec.write)));
        this.send(this.streamFrame(f.serial, f.proc, MessageStatus.OK)); // the stray OK libvirtd sends
        return;
      }
      up.chunks.push(Buffer.from(f.payload));
      return;
    }
    this.uploads.delete(f.serial);
    if (f.status === MessageStatus.OK) {
      const data = Buffer.concat(up.chunks);
      const old = up.vol.content;
      const next = Buffer.alloc(Math.max(old.length, up.offset + data.length));
      old.copy(next);
      data.copy(next, up.offset);
      up.vol.content = next;
      this.server.recordUpload({ session: this.id, serial: f.serial, vol: up.vol.name, bytes: data.length, maxPacket: up.maxPacket, aborted: false });
    } else {
      this.server.recordUpload({ session: this.id, serial: f.serial, vol: up.vol.name, bytes: up.bytes, maxPacket: up.maxPacket, aborted: true });
    }
    this.send(this.streamFrame(f.serial, f.proc, MessageStatus.OK));
  }

  /** Data in chunks, then an empty CONTINUE (EOF); libvirtd then waits for the client's STREAM/OK. */
  private download(serial: number, vol: FakeVolume, offset: number, length: number): void {
    const end = length > 0 ? Math.min(vol.content.length, offset + length) : vol.content.length;
    for (let o = offset; o < end; o += STREAM_CHUNK_MAX) {
      this.send(this.streamFrame(serial, Proc.STORAGE_VOL_DOWNLOAD, MessageStatus.CONTINUE, vol.content.subarray(o, Math.min(end, o + STREAM_CHUNK_MAX))));
    }
    this.send(this.streamFrame(serial, Proc.STORAGE_VOL_DOWNLOAD, MessageStatus.CONTINUE)); // EOF
    this.downloads.add(serial);
  }

  /** libvirtd pings after `intervalMs` of silence and closes after `count` unanswered pings. */
  private startServerPings(): void {
    const ka = this.server.options.keepalive;
    if (!ka || this.pingTimer) return;
    this.pingTimer = setInterval(() => {
      if (this.closed || Date.now() - this.lastRx < ka.intervalMs) return;
      if (this.unansweredPings >= ka.count) {
        this.server.recordKeepaliveClose(this.id);
        this.destroy();
        return;
      }
      this.unansweredPings++;
      this.sendKeepalive(KEEPALIVE_PROC_PING);
    }, ka.intervalMs);
    this.pingTimer.unref();
  }
}
