const UNITS: Record<string, number> = { '': 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 };

/**
 * Parses a size such as `1MiB`, `512KiB` or `65536` (bytes) into bytes; undefined when it is not
 * one. Binary units only, so that `1MB` never silently means something else.
 */
export function parseByteSize(text: string): number | undefined {
  const m = /^(\d+)\s*([a-z]*)$/i.exec(text.trim());
  if (!m) return undefined;
  const unit = UNITS[(m[2] ?? '').toLowerCase()];
  if (unit === undefined) return undefined;
  const n = Number(m[1]) * unit;
  return Number.isSafeInteger(n) ? n : undefined;
}
