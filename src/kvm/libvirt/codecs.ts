/**
 * XDR codecs of remote_protocol.x structures. Each codec both writes and reads, so the client
 * (write args, read results) and the test fake (read args, write results) share one definition.
 */
import { STRING_MAX } from './constants.ts';
import type { RemoteError } from './errors.ts';
import type { DomainRef, NetworkRef, StoragePoolRef, StorageVolRef } from './types.ts';
import { XdrError, type XdrReader, type XdrWriter } from './xdr.ts';

export interface Codec<T> {
  readonly write: (w: XdrWriter, v: T) => void;
  readonly read: (r: XdrReader) => T;
}

export const UUID_BYTES = 16;

/** A bigint as a number, refusing values that would lose precision. */
export function safeNumber(v: bigint, what: string): number {
  if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new XdrError(`${what} ${v} does not fit in a JavaScript number`);
  }
  return Number(v);
}

export const voidCodec: Codec<void> = {
  write: () => undefined,
  read: () => undefined,
};

export const intCodec: Codec<number> = { write: (w, v) => void w.int(v), read: (r) => r.int() };
export const uintCodec: Codec<number> = { write: (w, v) => void w.uint(v), read: (r) => r.uint() };
export const stringCodec: Codec<string> = {
  write: (w, v) => void w.string(v, STRING_MAX),
  read: (r) => r.string(STRING_MAX),
};
/** `remote_string`: an optional string. */
export const optStringCodec: Codec<string | null> = {
  write: (w, v) => void w.optional(v, (ww, s) => ww.string(s, STRING_MAX)),
  read: (r) => r.optional((rr) => rr.string(STRING_MAX)),
};
/** An `unsigned hyper` exposed as a safe number. */
export function uhyperNumber(what: string): Codec<number> {
  return {
    write: (w, v) => void w.uhyper(BigInt(v)),
    read: (r) => safeNumber(r.uhyper(), what),
  };
}

export const domainRefCodec: Codec<DomainRef> = {
  write: (w, d) => void w.string(d.name, STRING_MAX).fixedOpaque(d.uuid, UUID_BYTES).int(d.id),
  read: (r) => ({ name: r.string(STRING_MAX), uuid: r.fixedOpaque(UUID_BYTES), id: r.int() }),
};

export const poolRefCodec: Codec<StoragePoolRef> = {
  write: (w, p) => void w.string(p.name, STRING_MAX).fixedOpaque(p.uuid, UUID_BYTES),
  read: (r) => ({ name: r.string(STRING_MAX), uuid: r.fixedOpaque(UUID_BYTES) }),
};

export const volRefCodec: Codec<StorageVolRef> = {
  write: (w, v) => void w.string(v.pool, STRING_MAX).string(v.name, STRING_MAX).string(v.key, STRING_MAX),
  read: (r) => ({ pool: r.string(STRING_MAX), name: r.string(STRING_MAX), key: r.string(STRING_MAX) }),
};

export const networkRefCodec: Codec<NetworkRef> = {
  write: (w, n) => void w.string(n.name, STRING_MAX).fixedOpaque(n.uuid, UUID_BYTES),
  read: (r) => ({ name: r.string(STRING_MAX), uuid: r.fixedOpaque(UUID_BYTES) }),
};

/** `remote_error`, the payload of any REPLY or STREAM with status ERROR. */
export const remoteErrorCodec: Codec<RemoteError> = {
  write(w, e) {
    w.int(e.code).int(e.domain);
    optStringCodec.write(w, e.message);
    w.int(e.level);
    w.uint(0); // dom: null
    optStringCodec.write(w, e.str1);
    optStringCodec.write(w, e.str2);
    optStringCodec.write(w, e.str3);
    w.int(e.int1).int(e.int2);
    w.uint(0); // net: null
  },
  read(r) {
    const code = r.int();
    const domain = r.int();
    const message = optStringCodec.read(r);
    const level = r.int();
    r.optional(domainRefCodec.read);
    const str1 = optStringCodec.read(r);
    const str2 = optStringCodec.read(r);
    const str3 = optStringCodec.read(r);
    const int1 = r.int();
    const int2 = r.int();
    r.optional(networkRefCodec.read);
    return { code, domain, message, level, str1, str2, str3, int1, int2 };
  },
};

/** A remote_error with the usual filler (str1 = message, ints −1), as the daemon sends them. */
export function remoteError(code: number, domain: number, message: string): RemoteError {
  return { code, domain, message, level: 2, str1: message, str2: null, str3: null, int1: -1, int2: -1 };
}

/** A struct codec from an ordered list of field codecs. */
export function struct<T extends object>(fields: { [K in keyof T]: Codec<T[K]> }): Codec<T> {
  const entries = Object.entries(fields) as [keyof T & string, Codec<unknown>][];
  return {
    write(w, v) {
      for (const [k, c] of entries) c.write(w, v[k]);
    },
    read(r) {
      const out: Record<string, unknown> = {};
      for (const [k, c] of entries) out[k] = c.read(r);
      return out as T;
    },
  };
}
