/** Decimal (`GB`: 10^9) and binary (`GiB`: 2^30) byte units, as a traffic budget is written. */
const UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  pb: 1e15,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
  pib: 1024 ** 5,
};

/**
 * Bytes of a traffic quantity: a number of bytes, or a string such as `500GB` (decimal) or `2TiB`
 * (binary), a fraction allowed (`1.5TB`). Undefined when it is neither, or not a positive safe integer.
 */
export function parseTrafficQuantity(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? value : undefined;
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(value.trim());
  if (!m) return undefined;
  const unit = m[2] === '' ? 1 : UNITS[(m[2] ?? '').toLowerCase()];
  if (unit === undefined) return undefined;
  const n = Math.round(Number(m[1]) * unit);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}
