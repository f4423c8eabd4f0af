/**
 * Framing: a 4-byte length (counting itself), a 24-byte header, then the payload.
 * `FrameDecoder` accepts chunks split or coalesced arbitrarily and buffers at most one frame.
 */
import { FRAME_HEADER_BYTES, FRAME_MAX, PROTOCOL_VERSION } from './constants.ts';
import { LibvirtProtocolError } from './errors.ts';

export interface FrameHeader {
  prog: number;
  vers: number;
  proc: number;
  type: number;
  serial: number;
  status: number;
}

export interface Frame extends FrameHeader {
  payload: Buffer;
}

/** Builds one whole frame (header and payload in a single Buffer). */
export function encodeFrame(h: Omit<FrameHeader, 'vers'> & { vers?: number }, payload?: Uint8Array): Buffer {
  const bodyLength = payload?.length ?? 0;
  const length = FRAME_HEADER_BYTES + bodyLength;
  if (length > FRAME_MAX) throw new LibvirtProtocolError(`frame of ${length} bytes exceeds the ${FRAME_MAX}-byte limit`);
  const buf = Buffer.allocUnsafe(length);
  buf.writeUInt32BE(length, 0);
  buf.writeUInt32BE(h.prog >>> 0, 4);
  buf.writeUInt32BE((h.vers ?? PROTOCOL_VERSION) >>> 0, 8);
  buf.writeInt32BE(h.proc, 12);
  buf.writeInt32BE(h.type, 16);
  buf.writeUInt32BE(h.serial >>> 0, 20);
  buf.writeInt32BE(h.status, 24);
  if (payload && bodyLength > 0) buf.set(payload, FRAME_HEADER_BYTES);
  return buf;
}

/** Reads the header of one whole frame (as produced by FrameDecoder). */
export function decodeFrame(buf: Buffer): Frame {
  if (buf.length < FRAME_HEADER_BYTES) throw new LibvirtProtocolError(`frame of ${buf.length} bytes is shorter than its header`);
  const length = buf.readUInt32BE(0);
  if (length !== buf.length) throw new LibvirtProtocolError(`frame length word ${length} does not match ${buf.length} bytes`);
  return {
    prog: buf.readUInt32BE(4),
    vers: buf.readUInt32BE(8),
    proc: buf.readInt32BE(12),
    type: buf.readInt32BE(16),
    serial: buf.readUInt32BE(20),
    status: buf.readInt32BE(24),
    payload: buf.subarray(FRAME_HEADER_BYTES),
  };
}

/** Checks a length word; throws LibvirtProtocolError when it is out of range. */
export function checkFrameLength(length: number): void {
  if (length < FRAME_HEADER_BYTES || length > FRAME_MAX) {
    throw new LibvirtProtocolError(`invalid frame length ${length} (must be ${FRAME_HEADER_BYTES}..${FRAME_MAX})`);
  }
}

/**
 * Reassembles frames from a byte stream. `push` returns the frames completed by a chunk and
 * throws LibvirtProtocolError on an invalid length word; the decoder is then unusable.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** Length of the frame being assembled, once its length word is known. */
  private want = -1;

  /** Bytes held while waiting for the rest of a frame. */
  get pending(): number {
    return this.buffered;
  }

  push(chunk: Buffer): Frame[] {
    const out: Frame[] = [];
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    for (;;) {
      if (this.want < 0) {
        if (this.buffered < 4) break;
        const length = this.peekLength();
        checkFrameLength(length);
        this.want = length;
      }
      if (this.buffered < this.want) break;
      out.push(decodeFrame(this.take(this.want)));
      this.want = -1;
    }
    return out;
  }

  private peekLength(): number {
    const first = this.chunks[0]!;
    if (first.length >= 4) return first.readUInt32BE(0);
    const four = Buffer.alloc(4);
    let got = 0;
    for (const c of this.chunks) {
      const n = Math.min(4 - got, c.length);
      c.copy(four, got, 0, n);
      got += n;
      if (got === 4) break;
    }
    return four.readUInt32BE(0);
  }

  private take(n: number): Buffer {
    const first = this.chunks[0]!;
    if (first.length >= n) {
      const frame = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      this.buffered -= n;
      return frame;
    }
    const frame = Buffer.allocUnsafe(n);
    let got = 0;
    let used = 0;
    while (got < n) {
      const c = this.chunks[used]!;
      const k = Math.min(n - got, c.length);
      c.copy(frame, got, 0, k);
      got += k;
      if (k === c.length) used++;
      else this.chunks[used] = c.subarray(k);
    }
    this.chunks.splice(0, used);
    this.buffered -= n;
    return frame;
  }
}
