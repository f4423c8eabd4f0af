import { parseDuration } from '../schema/duration.ts';
import { parseEventId, type EventQuery } from './event-sink.ts';

/** A `since` duration reaches back at most this far (the longest --events-max-age). */
export const MAX_SINCE_MS = 2160 * 3_600_000;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

export const SINCE_FORMS = 'an event id (1733050000000-0), an RFC 3339 time (2026-12-01T15:00:00Z) or a duration up to 2160h (10m)';

/**
 * `since` as the API and `egress events --since` take it: an event id (events after it, the
 * cursor of a watch), an RFC 3339 time, or a duration back from `now` (`10m`). Undefined when
 * the text is none of these.
 */
export function parseSince(value: string, now: number): EventQuery['since'] | undefined {
  if (parseEventId(value)) return { id: value };
  if (RFC3339.test(value)) {
    const ms = Date.parse(value);
    return Number.isFinite(ms) ? { timeMs: ms } : undefined;
  }
  const ms = parseDuration(value);
  return ms !== undefined && ms > 0 && ms <= MAX_SINCE_MS ? { timeMs: now - ms } : undefined;
}
