/** Parses Go-style durations as users type them in flags and config: `0`, `500ms`, `10s`, `1m`, `1h30m`. */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const DURATION = /^(-)?((?:\d+(?:\.\d+)?(?:ms|s|m|h))+|0)$/;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;

/** Milliseconds, or undefined when the text is not a duration. Negative durations parse (callers reject them). */
export function parseDuration(text: string): number | undefined {
  const m = DURATION.exec(text.trim());
  if (!m) return undefined;
  const body = m[2] ?? '0';
  if (body === '0') return 0;
  let total = 0;
  for (const part of body.matchAll(PART)) total += Number(part[1]) * (UNIT_MS[part[2] ?? 'ms'] ?? 1);
  return Math.round(m[1] ? -total : total);
}

/** Formats milliseconds the way the flags take them (`90000` → `1m30s`). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(ms);
  let out = '';
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (rest >= size) {
      out += `${Math.floor(rest / size)}${unit}`;
      rest %= size;
    }
  }
  if (rest > 0) out += `${rest}ms`;
  return sign + out;
}
