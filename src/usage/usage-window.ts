/*
 * A usage window [from, to) and the stored periods that cover it: whole UTC days where the window
 * holds them, single hours at its edges. Traffic is kept by the hour, so a window counts every hour
 * it overlaps, whole; instance seconds are cut exactly at the window's bounds. Pure.
 */
import { EgressError } from '../errors.ts';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;
/** The longest window a query may span (the default retention). */
export const MAX_SPAN_DAYS = 400;

/** A window that is not one: `from` not before `to`, a span beyond MAX_SPAN_DAYS, an invalid date. */
export class UsageWindowError extends EgressError {
  /** The parameter at fault: `from`, `to`, or both (`from,to`). */
  readonly field: string;
  constructor(field: string, message: string) {
    super('ERR_USAGE_WINDOW', message, { retryable: false });
    this.field = field;
  }
}

/** A record the usage store cannot keep: a time that is not one (a caller's bug, final). */
export class UsageRecordError extends EgressError {
  constructor(message: string) {
    super('ERR_USAGE_RECORD', message, { retryable: false });
  }
}

/** Epoch ms of an ISO time a record carries; UsageRecordError when it is not one. */
export function recordTimeMs(what: string, text: string): number {
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new UsageRecordError(`${what}: "${text.slice(0, 64)}" is not a time`);
  return ms;
}

export function checkWindow(from: Date, to: Date): void {
  if (Number.isNaN(from.getTime())) throw new UsageWindowError('from', '"from" is not a valid time');
  if (Number.isNaN(to.getTime())) throw new UsageWindowError('to', '"to" is not a valid time');
  if (from.getTime() >= to.getTime()) throw new UsageWindowError('from,to', `"from" (${from.toISOString()}) must be before "to" (${to.toISOString()})`);
  if (to.getTime() - from.getTime() > MAX_SPAN_DAYS * DAY_MS)
    throw new UsageWindowError('from,to', `the window from "from" to "to" spans more than ${MAX_SPAN_DAYS} days`);
}

/** `YYYY-MM-DD` of the UTC day `ms` falls in. */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** `YYYY-MM-DDTHH` of the UTC hour `ms` falls in: the hour part of a stored period. */
export function hourKeyOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 13);
}

/** `YYYY-MM-DDTHH` of a record's hour (rounded down to the hour), or undefined for an hour that is not a time. */
export function recordHour(hour: string): string | undefined {
  const ms = Date.parse(hour);
  return Number.isNaN(ms) ? undefined : hourKeyOf(ms);
}

/** The whole days and the edge hours that cover [from, to), rounded out to whole hours. */
export function windowPeriods(fromMs: number, toMs: number): { days: string[]; hours: string[] } {
  const days: string[] = [];
  const hours: string[] = [];
  let at = Math.floor(fromMs / HOUR_MS) * HOUR_MS;
  const end = Math.ceil(toMs / HOUR_MS) * HOUR_MS;
  while (at < end) {
    if (at % DAY_MS === 0 && at + DAY_MS <= end) {
      days.push(dayOf(at));
      at += DAY_MS;
    } else {
      hours.push(hourKeyOf(at));
      at += HOUR_MS;
    }
  }
  return { days, hours };
}

/** The UTC days [from, to) touches, each with its part of the window. */
export function daysOfWindow(fromMs: number, toMs: number): { day: string; startMs: number; endMs: number }[] {
  const out: { day: string; startMs: number; endMs: number }[] = [];
  for (let start = Math.floor(fromMs / DAY_MS) * DAY_MS; start < toMs; start += DAY_MS) {
    out.push({ day: dayOf(start), startMs: Math.max(start, fromMs), endMs: Math.min(start + DAY_MS, toMs) });
  }
  return out;
}

/** Milliseconds [startMs, endMs) has in common with [fromMs, toMs). */
export function overlapMs(startMs: number, endMs: number, fromMs: number, toMs: number): number {
  return Math.max(0, Math.min(endMs, toMs) - Math.max(startMs, fromMs));
}
