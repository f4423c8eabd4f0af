/**
 * Bounds-checked XDR (RFC 4506) over Buffer, as libvirt's remote protocol uses it.
 *
 * The reader never trusts a length from the wire: every count is checked against its declared
 * maximum and against the bytes left before anything is allocated. Pad bytes must be zero,
 * optional flags must be exactly 0 or 1, and `end()` rejects trailing bytes.
 */
import { EgressError } from '../../errors.ts';

export class XdrError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_LIBVIRT_XDR', `malformed XDR: ${message}`, { retryable: false, ...options });
  }
}

const UINT32_MAX = 0xffff_ffff;
const pad4 = (n: number): number => (4 - (n % 4)) % 4;

export class XdrReader {
  private offset = 0;

  constructor(private readonly buf: Buffer) {}

  /** Bytes not read yet. */
  get remaining(): number {
    return this.buf.length - this.offset;
  }

  private need(n: number, what: string): void {
    if (n > this.remaining) throw new XdrError(`${what} needs ${n} bytes, ${this.remaining} left`);
  }

  int(): number {
    this.need(4, 'int');
    const v = this.buf.readInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  uint(): number {
    this.need(4, 'unsigned int');
    const v = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  hyper(): bigint {
    this.need(8, 'hyper');
    const v = this.buf.readBigInt64BE(this.offset);
    this.offset += 8;
    return v;
  }

  uhyper(): bigint {
    this.need(8, 'unsigned hyper');
    const v = this.buf.readBigUInt64BE(this.offset);
    this.offset += 8;
    return v;
  }

  bool(): boolean {
    const v = this.uint();
    if (v !== 0 && v !== 1) throw new XdrError(`bool must be 0 or 1, got ${v}`);
    return v === 1;
  }

  private skipPad(n: number): void {
    const p = pad4(n);
    this.need(p, 'padding');
    for (let i = 0; i < p; i++) {
      if (this.buf[this.offset + i] !== 0) throw new XdrError('non-zero padding byte');
    }
    this.offset += p;
  }

  /** `opaque x[n]`: exactly n bytes, padded; the returned Buffer is a copy. */
  fixedOpaque(n: number): Buffer {
    this.need(n, 'fixed opaque');
    const out = Buffer.from(this.buf.subarray(this.offset, this.offset + n));
    this.offset += n;
    this.skipPad(n);
    return out;
  }

  /** `opaque x<max>`: a length, then the bytes; the returned Buffer is a copy. */
  varOpaque(max: number): Buffer {
    const n = this.uint();
    if (n > max) throw new XdrError(`opaque length ${n} exceeds its maximum ${max}`);
    return this.fixedOpaque(n);
  }

  /** `string<max>`: UTF-8 bytes with a length prefix and zero padding, no terminator. */
  string(max: number): string {
    const n = this.uint();
    if (n > max) throw new XdrError(`string length ${n} exceeds its maximum ${max}`);
    this.need(n, 'string');
    const s = this.buf.toString('utf8', this.offset, this.offset + n);
    this.offset += n;
    this.skipPad(n);
    return s;
  }

  /** `T *x`: a 0/1 flag, then T when 1. Any other flag value is an error. */
  optional<T>(read: (r: XdrReader) => T): T | null {
    const flag = this.uint();
    if (flag === 0) return null;
    if (flag !== 1) throw new XdrError(`optional flag must be 0 or 1, got ${flag}`);
    return read(this);
  }

  /** `T x<max>`: a count, then the elements. Every XDR element takes at least 4 bytes. */
  array<T>(max: number, read: (r: XdrReader) => T): T[] {
    const n = this.uint();
    if (n > max) throw new XdrError(`array count ${n} exceeds its maximum ${max}`);
    if (n * 4 > this.remaining) throw new XdrError(`array count ${n} cannot fit in ${this.remaining} bytes`);
    const out: T[] = [];
    for (let i = 0; i < n; i++) out.push(read(this));
    return out;
  }

  /** Asserts that the whole payload was consumed. */
  end(): void {
    if (this.remaining !== 0) throw new XdrError(`${this.remaining} trailing bytes after the payload`);
  }
}

/** Decodes a whole payload with `read` and rejects trailing bytes. */
export function decodeXdr<T>(buf: Buffer, read: (r: XdrReader) => T): T {
  const r = new XdrReader(buf);
  const v = read(r);
  r.end();
  return v;
}

export class XdrWriter {
  private buf: Buffer;
  private offset = 0;

  constructor(initial = 256) {
    this.buf = Buffer.allocUnsafe(initial);
  }

  private reserve(n: number): void {
    if (this.offset + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.offset + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.offset);
    this.buf = next;
  }

  int(v: number): this {
    if (!Number.isInteger(v) || v < -0x8000_0000 || v > 0x7fff_ffff) throw new XdrError(`int out of range: ${v}`);
    this.reserve(4);
    this.offset = this.buf.writeInt32BE(v, this.offset);
    return this;
  }

  uint(v: number): this {
    if (!Number.isInteger(v) || v < 0 || v > UINT32_MAX) throw new XdrError(`unsigned int out of range: ${v}`);
    this.reserve(4);
    this.offset = this.buf.writeUInt32BE(v, this.offset);
    return this;
  }

  hyper(v: bigint): this {
    if (v < -(1n << 63n) || v >= 1n << 63n) throw new XdrError(`hyper out of range: ${v}`);
    this.reserve(8);
    this.offset = this.buf.writeBigInt64BE(v, this.offset);
    return this;
  }

  uhyper(v: bigint): this {
    if (v < 0n || v >= 1n << 64n) throw new XdrError(`unsigned hyper out of range: ${v}`);
    this.reserve(8);
    this.offset = this.buf.writeBigUInt64BE(v, this.offset);
    return this;
  }

  bool(v: boolean): this {
    return this.uint(v ? 1 : 0);
  }

  private pad(n: number): void {
    const p = pad4(n);
    this.reserve(p);
    this.buf.fill(0, this.offset, this.offset + p);
    this.offset += p;
  }

  fixedOpaque(bytes: Uint8Array, n: number): this {
    if (bytes.length !== n) throw new XdrError(`fixed opaque must be ${n} bytes, got ${bytes.length}`);
    this.reserve(n);
    this.buf.set(bytes, this.offset);
    this.offset += n;
    this.pad(n);
    return this;
  }

  varOpaque(bytes: Uint8Array, max: number): this {
    if (bytes.length > max) throw new XdrError(`opaque length ${bytes.length} exceeds its maximum ${max}`);
    this.uint(bytes.length);
    return this.fixedOpaque(bytes, bytes.length);
  }

  string(s: string, max: number): this {
    const n = Buffer.byteLength(s, 'utf8');
    if (n > max) throw new XdrError(`string length ${n} exceeds its maximum ${max}`);
    this.uint(n);
    this.reserve(n);
    this.buf.write(s, this.offset, 'utf8');
    this.offset += n;
    this.pad(n);
    return this;
  }

  optional<T>(v: T | null | undefined, write: (w: XdrWriter, v: T) => void): this {
    if (v === null || v === undefined) return this.uint(0);
    this.uint(1);
    write(this, v);
    return this;
  }

  array<T>(items: readonly T[], max: number, write: (w: XdrWriter, v: T) => void): this {
    if (items.length > max) throw new XdrError(`array count ${items.length} exceeds its maximum ${max}`);
    this.uint(items.length);
    for (const item of items) write(this, item);
    return this;
  }

  /** The bytes written so far (a view: do not keep writing after taking it). */
  finish(): Buffer {
    return this.buf.subarray(0, this.offset);
  }
}

/** Encodes one value with `write` into a fresh payload. */
export function encodeXdr<T>(v: T, write: (w: XdrWriter, v: T) => void): Buffer {
  const w = new XdrWriter();
  write(w, v);
  return w.finish();
}
