/**
 * Reads the files of a plain ISO 9660 image's root directory the way Linux shows them without Rock
 * Ridge (mount option map=normal: lower case, the `;1` version and a trailing dot dropped), and the
 * volume label. For tests of the NoCloud seed; written from ECMA-119, independent of the writer.
 */
export interface IsoContents {
  label: string;
  files: Map<string, Buffer>;
}

export function readIso9660(image: Buffer): IsoContents {
  const SECTOR = 2048;
  const pvd = image.subarray(16 * SECTOR, 17 * SECTOR);
  if (pvd[0] !== 1 || pvd.toString('ascii', 1, 6) !== 'CD001') throw new Error('no primary volume descriptor at sector 16');
  if (pvd.readUInt16LE(128) !== SECTOR) throw new Error('unexpected logical block size');
  const label = pvd.toString('ascii', 40, 72).trimEnd();
  const rootRecord = pvd.subarray(156, 156 + 34);
  const rootExtent = rootRecord.readUInt32LE(2);
  const rootSize = rootRecord.readUInt32LE(10);
  const dir = image.subarray(rootExtent * SECTOR, rootExtent * SECTOR + rootSize);
  const files = new Map<string, Buffer>();
  for (let at = 0; at < dir.length;) {
    const length = dir[at] ?? 0;
    if (length === 0) {
      at = (Math.floor(at / SECTOR) + 1) * SECTOR;
      continue;
    }
    const rec = dir.subarray(at, at + length);
    const flags = rec[25] ?? 0;
    const nameLength = rec[32] ?? 0;
    const raw = rec.toString('ascii', 33, 33 + nameLength);
    if (!(flags & 2)) {
      const name = raw.toLowerCase().replace(/;1$/, '').replace(/\.$/, '');
      const extent = rec.readUInt32LE(2);
      const size = rec.readUInt32LE(10);
      if (rec.readUInt32BE(6) !== extent || rec.readUInt32BE(14) !== size) throw new Error(`${raw}: both-endian fields disagree`);
      files.set(name, image.subarray(extent * SECTOR, extent * SECTOR + size));
    }
    at += length;
  }
  return { label, files };
}
