/**
 * A minimal ISO 9660 image writer: one volume, a root directory holding a few small files, no
 * Rock Ridge or Joliet. Enough for a cloud-init NoCloud seed (volume `CIDATA`, files `USER-DATA`
 * and `META-DATA`): Linux shows plain ISO 9660 names in lower case without the `;1` version
 * (mount option `map=normal`, the default), which is the `user-data` and `meta-data` cloud-init reads.
 *
 * Layout (2048-byte sectors): 0-15 system area (zero), 16 primary volume descriptor,
 * 17 set terminator, 18 little-endian path table, 19 big-endian path table, 20 the root
 * directory (one sector), then each file's data from a sector boundary.
 */

const SECTOR = 2048;

export interface IsoFile {
  /** ISO 9660 name: upper-case letters, digits, `_`, `-` and one `.` (a `;1` version is appended). */
  name: string;
  data: Buffer;
}

export interface IsoImage {
  /** Volume identifier (the label blkid reports): upper-case letters, digits and `_`, ≤ 32. */
  volumeId: string;
  files: IsoFile[];
  /** Recorded as every date in the image (default: the epoch, for reproducible bytes). */
  date?: Date;
}

function both16(buf: Buffer, at: number, v: number): void {
  buf.writeUInt16LE(v, at);
  buf.writeUInt16BE(v, at + 2);
}

function both32(buf: Buffer, at: number, v: number): void {
  buf.writeUInt32LE(v, at);
  buf.writeUInt32BE(v, at + 4);
}

/** A space-padded a/d-characters field. */
function text(buf: Buffer, at: number, length: number, value: string): void {
  buf.fill(0x20, at, at + length);
  buf.write(value, at, length, 'ascii');
}

/** The 7-byte date of a directory record (UTC). */
function recordDate(d: Date): Buffer {
  return Buffer.from([d.getUTCFullYear() - 1900, d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), 0]);
}

/** The 17-byte date of a volume descriptor: digits `YYYYMMDDHHMMSScc` and a zone offset (UTC). */
function volumeDate(d: Date): Buffer {
  const p = (n: number, w: number): string => String(n).padStart(w, '0');
  const digits = `${p(d.getUTCFullYear(), 4)}${p(d.getUTCMonth() + 1, 2)}${p(d.getUTCDate(), 2)}${p(d.getUTCHours(), 2)}${p(d.getUTCMinutes(), 2)}${p(d.getUTCSeconds(), 2)}00`;
  return Buffer.concat([Buffer.from(digits, 'ascii'), Buffer.from([0])]);
}

function dirRecord(name: Buffer, extent: number, size: number, isDir: boolean, date: Date): Buffer {
  const length = 33 + name.length + (name.length % 2 === 0 ? 1 : 0);
  const r = Buffer.alloc(length);
  r[0] = length;
  both32(r, 2, extent);
  both32(r, 10, size);
  recordDate(date).copy(r, 18);
  r[25] = isDir ? 2 : 0;
  both16(r, 28, 1);
  r[32] = name.length;
  name.copy(r, 33);
  return r;
}

function checkName(name: string): void {
  if (!/^[A-Z0-9_-]{1,30}(\.[A-Z0-9_]{0,3})?$/.test(name)) throw new TypeError(`ISO 9660 file name "${name}": upper-case letters, digits, _ and - only`);
}

/** The image bytes; deterministic for the same input. */
export function buildIso9660(image: IsoImage): Buffer {
  if (!/^[A-Z0-9_]{1,32}$/.test(image.volumeId))
    throw new TypeError(`ISO 9660 volume id "${image.volumeId}": upper-case letters, digits and _ only, at most 32`);
  const date = image.date ?? new Date(0);
  const files = [...image.files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  files.forEach((f) => checkName(f.name));
  if (new Set(files.map((f) => f.name)).size !== files.length) throw new TypeError('ISO 9660: duplicate file name');

  const ROOT = 20;
  let next = ROOT + 1;
  const placed = files.map((f) => {
    const extent = next;
    next += Math.max(1, Math.ceil(f.data.length / SECTOR));
    const stored = f.name.includes('.') ? f.name : `${f.name}.`;
    return { ...f, extent, id: Buffer.from(`${stored};1`, 'ascii') };
  });
  const totalSectors = next;

  const root = Buffer.alloc(SECTOR);
  let at = 0;
  for (const r of [
    dirRecord(Buffer.from([0]), ROOT, SECTOR, true, date),
    dirRecord(Buffer.from([1]), ROOT, SECTOR, true, date),
    ...placed.map((f) => dirRecord(f.id, f.extent, f.data.length, false, date)),
  ]) {
    if (at + r.length > SECTOR) throw new TypeError('ISO 9660: too many files for a one-sector root directory');
    r.copy(root, at);
    at += r.length;
  }

  // One path table entry: the root (name length 1, the byte 0, parent 1).
  const pathTable = (bigEndian: boolean): Buffer => {
    const t = Buffer.alloc(SECTOR);
    t[0] = 1;
    if (bigEndian) {
      t.writeUInt32BE(ROOT, 2);
      t.writeUInt16BE(1, 6);
    } else {
      t.writeUInt32LE(ROOT, 2);
      t.writeUInt16LE(1, 6);
    }
    return t;
  };
  const PATH_TABLE_SIZE = 10;

  const pvd = Buffer.alloc(SECTOR);
  pvd[0] = 1;
  pvd.write('CD001', 1, 'ascii');
  pvd[6] = 1;
  text(pvd, 8, 32, '');
  text(pvd, 40, 32, image.volumeId);
  both32(pvd, 80, totalSectors);
  both16(pvd, 120, 1);
  both16(pvd, 124, 1);
  both16(pvd, 128, SECTOR);
  both32(pvd, 132, PATH_TABLE_SIZE);
  pvd.writeUInt32LE(18, 140);
  pvd.writeUInt32BE(19, 148);
  dirRecord(Buffer.from([0]), ROOT, SECTOR, true, date).copy(pvd, 156);
  text(pvd, 190, 128, ''); // volume set
  text(pvd, 318, 128, ''); // publisher
  text(pvd, 446, 128, ''); // data preparer
  text(pvd, 574, 128, 'EGRESS-PROXIES'); // application
  text(pvd, 702, 37, ''); // copyright file
  text(pvd, 739, 37, ''); // abstract file
  text(pvd, 776, 37, ''); // bibliographic file
  const vdate = volumeDate(date);
  vdate.copy(pvd, 813); // created
  vdate.copy(pvd, 830); // modified
  Buffer.from('0000000000000000\0', 'ascii').copy(pvd, 847); // expires: never
  vdate.copy(pvd, 864); // effective
  pvd[881] = 1;

  const terminator = Buffer.alloc(SECTOR);
  terminator[0] = 255;
  terminator.write('CD001', 1, 'ascii');
  terminator[6] = 1;

  const out = Buffer.alloc(totalSectors * SECTOR);
  pvd.copy(out, 16 * SECTOR);
  terminator.copy(out, 17 * SECTOR);
  pathTable(false).copy(out, 18 * SECTOR);
  pathTable(true).copy(out, 19 * SECTOR);
  root.copy(out, ROOT * SECTOR);
  for (const f of placed) f.data.copy(out, f.extent * SECTOR);
  return out;
}
