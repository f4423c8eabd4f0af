/*
 * The times a usage window is given in, by the API and the CLI: RFC 3339 (`2026-11-01T10:00:00Z`,
 * `…+02:00`, fractions) or a UTC date (`2026-11-01`). A date alone means its start as `from` and
 * its end as `to`, so `from=2026-11-01&to=2026-11-07` holds both days. Pure.
 */
import { DAY_MS } from './usage-window.ts';

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

export const USAGE_TIME_FORMS = 'an RFC 3339 time (2026-11-01T10:00:00Z) or a date (2026-11-01)';

/** Epoch ms of a calendar date and time that exist (no 30 February, no hour 25), or undefined. */
function utc(y: number, mo: number, d: number, h = 0, mi = 0, s = 0): number | undefined {
  const ms = Date.UTC(y, mo - 1, d, h, mi, s);
  const t = new Date(ms);
  if (y < 1970 || y > 9999) return undefined;
  if (
    t.getUTCFullYear() !== y ||
    t.getUTCMonth() !== mo - 1 ||
    t.getUTCDate() !== d ||
    t.getUTCHours() !== h ||
    t.getUTCMinutes() !== mi ||
    t.getUTCSeconds() !== s
  )
    return undefined;
  return ms;
}

/** `text` as a time; `end`: a date alone means the end of that day. Undefined when it is neither form. */
export function parseUsageTime(text: string, end: boolean): Date | undefined {
  const date = DATE.exec(text);
  if (date) {
    const ms = utc(Number(date[1]), Number(date[2]), Number(date[3]));
    return ms === undefined ? undefined : new Date(end ? ms + DAY_MS : ms);
  }
  const m = TIME.exec(text);
  if (!m) return undefined;
  const ms = utc(Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]));
  if (ms === undefined) return undefined;
  const fraction = m[7] ? Math.floor(Number(`0${m[7]}`) * 1000) : 0;
  const zone = (m[8] ?? 'Z').toUpperCase();
  let offset = 0;
  if (zone !== 'Z') {
    const hours = Number(zone.slice(1, 3));
    const minutes = Number(zone.slice(4, 6));
    if (hours > 23 || minutes > 59) return undefined;
    offset = (zone.startsWith('-') ? -1 : 1) * (hours * 60 + minutes) * 60_000;
  }
  return new Date(ms + fraction - offset);
}
