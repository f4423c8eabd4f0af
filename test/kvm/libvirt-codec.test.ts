import { describe, expect, it } from 'vitest';
import { remoteErrorCodec } from '../../src/kvm/libvirt/codecs.ts';
import { FRAME_MAX, MessageType, REMOTE_PROGRAM } from '../../src/kvm/libvirt/constants.ts';
import { LibvirtError, LibvirtProtocolError, classifyLibvirtError } from '../../src/kvm/libvirt/errors.ts';
import { decodeFrame, encodeFrame, FrameDecoder } from '../../src/kvm/libvirt/frame.ts';
import { PROCEDURES, type ProcedureKey } from '../../src/kvm/libvirt/procedures.ts';
import { decodeXdr, encodeXdr, XdrError, XdrReader, XdrWriter } from '../../src/kvm/libvirt/xdr.ts';
import { SAMPLE_ARGS, SAMPLE_RESULTS } from '../fakes/libvirt/samples.ts';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

/** Frames recorded from libvirtd 9.0.0 (Debian 12) on test:///default. */
const GOLDEN = {
  authListCall: '0000001c 20008086 00000001 00000042 00000000 00000001 00000000',
  authListReply: '00000024 20008086 00000001 00000042 00000001 00000001 00000000 00000001 00000000',
  openCall: '00000038 20008086 00000001 00000001 00000000 00000003 00000000 00000001 0000000f 74657374 3a2f2f2f 64656661 756c7400 00000000',
  openReply: '0000001c 20008086 00000001 00000001 00000001 00000003 00000000',
  libVersionReply: '00000024 20008086 00000001 0000009d 00000001 00000004 00000000 00000000 00895440',
  lookupErrorReply:
    '00000070 20008086 00000001 00000017 00000001 00000005 00000001 0000002a 0000000c 00000001 00000010 446f6d61 696e206e 6f742066 6f756e64 00000002 00000000 00000001 00000010 446f6d61 696e206e 6f742066 6f756e64 00000000 00000000 ffffffff ffffffff 00000000',
  getInfoReply: '0000003c 20008086 00000001 00000010 00000001 00000007 00000000 00000001 00000000 00800000 00000000 00200000 00000002 18ec8b9a 22011ce0',
};

describe('XDR', () => {
  it('round-trips every primitive', () => {
    const w = new XdrWriter(1);
    w.int(-5)
      .uint(0xffff_ffff)
      .hyper(-(2n ** 62n))
      .uhyper(2n ** 64n - 1n)
      .bool(true);
    w.string('héllo', 100)
      .fixedOpaque(Buffer.alloc(16, 3), 16)
      .varOpaque(Buffer.from([1, 2, 3]), 10);
    w.optional<string>(null, (ww, s) => ww.string(s, 10)).optional('x', (ww, s) => ww.string(s, 10));
    w.array([1, 2, 3], 5, (ww, n) => ww.int(n));
    const buf = w.finish();
    expect(buf.length % 4).toBe(0);
    const r = new XdrReader(buf);
    expect(r.int()).toBe(-5);
    expect(r.uint()).toBe(0xffff_ffff);
    expect(r.hyper()).toBe(-(2n ** 62n));
    expect(r.uhyper()).toBe(2n ** 64n - 1n);
    expect(r.bool()).toBe(true);
    expect(r.string(100)).toBe('héllo');
    expect(r.fixedOpaque(16)).toEqual(Buffer.alloc(16, 3));
    expect(r.varOpaque(10)).toEqual(Buffer.from([1, 2, 3]));
    expect(r.optional((rr) => rr.string(10))).toBeNull();
    expect(r.optional((rr) => rr.string(10))).toBe('x');
    expect(r.array(5, (rr) => rr.int())).toEqual([1, 2, 3]);
    r.end();
  });

  it('rejects malformed input with XdrError', () => {
    const cases: [string, Buffer, (r: XdrReader) => unknown][] = [
      ['truncated int', hex('0000'), (r) => r.int()],
      ['string longer than its maximum', hex('00000009 61616161 61616161 61000000'), (r) => r.string(8)],
      ['string longer than the buffer', hex('7fffffff 61616161'), (r) => r.string(0x7fffffff)],
      ['non-zero padding', hex('00000001 61000100'), (r) => r.string(10)],
      ['optional flag 2', hex('00000002 00000000'), (r) => r.optional((rr) => rr.int())],
      ['bool 7', hex('00000007'), (r) => r.bool()],
      ['absurd array count', hex('ffffffff'), (r) => r.array(0xffffffff, (rr) => rr.int())],
      ['array over its maximum', hex('00000003 00000001 00000002 00000003'), (r) => r.array(2, (rr) => rr.int())],
      ['array count beyond the bytes left', hex('00000100 00000001'), (r) => r.array(16384, (rr) => rr.int())],
      ['short fixed opaque', hex('01020304'), (r) => r.fixedOpaque(16)],
    ];
    for (const [what, buf, read] of cases) {
      expect(() => read(new XdrReader(buf)), what).toThrow(XdrError);
    }
    expect(() => decodeXdr(hex('00000001 00000002'), (r) => r.int())).toThrow(/trailing/);
  });

  it('refuses to encode values out of range', () => {
    expect(() => new XdrWriter().int(2 ** 31)).toThrow(XdrError);
    expect(() => new XdrWriter().uint(-1)).toThrow(XdrError);
    expect(() => new XdrWriter().uhyper(-1n)).toThrow(XdrError);
    expect(() => new XdrWriter().string('abc', 2)).toThrow(XdrError);
    expect(() => new XdrWriter().fixedOpaque(Buffer.alloc(15), 16)).toThrow(XdrError);
  });

  it('round-trips the sample arguments and results of every procedure in the table', () => {
    for (const key of Object.keys(PROCEDURES) as ProcedureKey[]) {
      const def = PROCEDURES[key];
      const args = SAMPLE_ARGS[key];
      const ret = SAMPLE_RESULTS[key];
      expect(decodeXdr(encodeXdr(args, def.args.write as never), def.args.read), `${key} args`).toEqual(args);
      expect(decodeXdr(encodeXdr(ret, def.ret.write as never), def.ret.read), `${key} result`).toEqual(ret);
    }
  });
});

describe('golden frames from libvirtd 9.0.0', () => {
  it('encodes AUTH_LIST and CONNECT_OPEN calls byte for byte', () => {
    const auth = encodeFrame({ prog: REMOTE_PROGRAM, proc: 66, type: 0, serial: 1, status: 0 });
    expect(auth).toEqual(hex(GOLDEN.authListCall));
    const open = encodeFrame(
      { prog: REMOTE_PROGRAM, proc: 1, type: 0, serial: 3, status: 0 },
      encodeXdr({ name: 'test:///default', flags: 0 }, PROCEDURES.connectOpen.args.write),
    );
    expect(open).toEqual(hex(GOLDEN.openCall));
  });

  it('decodes the recorded replies', () => {
    const authReply = decodeFrame(hex(GOLDEN.authListReply));
    expect(authReply.type).toBe(MessageType.REPLY);
    expect(decodeXdr(authReply.payload, PROCEDURES.authList.ret.read)).toEqual([0]);
    expect(decodeFrame(hex(GOLDEN.openReply)).payload.length).toBe(0);
    const lib = decodeFrame(hex(GOLDEN.libVersionReply));
    expect(decodeXdr(lib.payload, PROCEDURES.getLibVersion.ret.read)).toBe(9_000_000);
    const err = decodeFrame(hex(GOLDEN.lookupErrorReply));
    expect(err.status).toBe(1);
    const remote = decodeXdr(err.payload, remoteErrorCodec.read);
    expect(remote).toMatchObject({ code: 42, domain: 12, message: 'Domain not found', level: 2, int1: -1, int2: -1 });
    expect(new LibvirtError(remote).kind).toBe('not-found');
    const info = decodeXdr(decodeFrame(hex(GOLDEN.getInfoReply)).payload, PROCEDURES.domainGetInfo.ret.read);
    expect(info).toEqual({ state: 1, maxMemKiB: 8_388_608, memoryKiB: 2_097_152, nrVirtCpu: 2, cpuTimeNs: 0x18ec8b9a22011ce0n });
  });
});

describe('FrameDecoder', () => {
  const frames = [
    encodeFrame(
      { prog: REMOTE_PROGRAM, proc: 3, type: 1, serial: 1, status: 0 },
      encodeXdr('QEMU', (w, s) => w.string(s, 100)),
    ),
    encodeFrame({ prog: REMOTE_PROGRAM, proc: 2, type: 1, serial: 2, status: 0 }),
    encodeFrame({ prog: REMOTE_PROGRAM, proc: 208, type: 3, serial: 3, status: 2 }, Buffer.alloc(70_000, 0xab)),
  ];
  const all = Buffer.concat(frames);

  it('reassembles frames from any chunking', () => {
    for (const size of [1, 2, 3, 5, 27, 28, 29, 1000, all.length]) {
      const d = new FrameDecoder();
      const got = [];
      for (let o = 0; o < all.length; o += size) got.push(...d.push(all.subarray(o, o + size)));
      expect(
        got.map((f) => f.serial),
        `chunk ${size}`,
      ).toEqual([1, 2, 3]);
      expect(got[2]!.payload.equals(Buffer.alloc(70_000, 0xab))).toBe(true);
      expect(d.pending).toBe(0);
    }
  });

  it('rejects lengths below 28 and above 32 MiB + 4 without allocating them', () => {
    const small = hex('0000001b 00000000');
    expect(() => new FrameDecoder().push(small)).toThrow(LibvirtProtocolError);
    const huge = Buffer.alloc(8);
    huge.writeUInt32BE(FRAME_MAX + 1, 0);
    expect(() => new FrameDecoder().push(huge)).toThrow(LibvirtProtocolError);
    const max = Buffer.alloc(8);
    max.writeUInt32BE(0xffff_ffff, 0);
    const d = new FrameDecoder();
    expect(() => d.push(max)).toThrow(/invalid frame length/);
  });

  it('holds a truncated frame without emitting it', () => {
    const d = new FrameDecoder();
    expect(d.push(frames[0]!.subarray(0, frames[0]!.length - 1))).toEqual([]);
    expect(d.pending).toBe(frames[0]!.length - 1);
  });
});

describe('error classification', () => {
  it('decides kinds from numbers only', () => {
    expect(classifyLibvirtError(42, 10)).toBe('not-found');
    expect(classifyLibvirtError(49, 18)).toBe('not-found');
    expect(classifyLibvirtError(50, 18)).toBe('not-found');
    expect(classifyLibvirtError(80, 20)).toBe('not-found');
    expect(classifyLibvirtError(9, 20, { procedure: 350 })).toBe('exists');
    expect(classifyLibvirtError(9, 20, { procedure: 196 })).toBe('other');
    expect(classifyLibvirtError(28, 20)).toBe('exists');
    expect(classifyLibvirtError(90, 18)).toBe('exists');
    expect(classifyLibvirtError(55, 20)).toBe('invalid-state');
    expect(classifyLibvirtError(45, 7)).toBe('auth');
    expect(classifyLibvirtError(79, 7)).toBe('auth');
    expect(classifyLibvirtError(39, 7, { authenticated: false })).toBe('auth');
    expect(classifyLibvirtError(39, 7, { authenticated: true })).toBe('unsupported');
    expect(classifyLibvirtError(88, 20)).toBe('access-denied');
    expect(classifyLibvirtError(3, 18)).toBe('unsupported');
    expect(classifyLibvirtError(84, 10)).toBe('unsupported');
    expect(classifyLibvirtError(1, 7)).toBe('other');
    expect(classifyLibvirtError(38, 38)).toBe('other');
  });
});
