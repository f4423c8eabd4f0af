import { ConfigError } from '../errors.ts';
import { formatDuration, parseDuration } from '../schema/duration.ts';

export const DEFAULT_CHECK_INTERVAL_MS = 60_000;
export const MIN_CHECK_INTERVAL_MS = 10_000;
export const MAX_DEFAULT_CHECK_TIMEOUT_MS = 15_000;

export interface CheckSchedule {
  /** 0 means scheduled checks are off. */
  intervalMs: number;
  /** Always positive: the derived default when the flag was 0. */
  timeoutMs: number;
}

function parseFlag(flag: string, text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined) throw new ConfigError(flag, `expected a duration such as 30s or 1m, got "${text}"`);
  return ms;
}

/**
 * The seed's flag rules, checked before anything connects anywhere:
 * the interval is 0 (off) or at least 10s; the timeout is not negative and not longer than
 * the interval, and 0 means min(15s, interval).
 */
export function resolveCheckSchedule(intervalText: string, timeoutText: string): CheckSchedule {
  const intervalMs = parseFlag('--provider-check-interval', intervalText);
  if (intervalMs < 0 || (intervalMs > 0 && intervalMs < MIN_CHECK_INTERVAL_MS)) {
    throw new ConfigError('--provider-check-interval', `must be 0 (off) or at least 10s, got ${intervalText}`);
  }
  const timeoutMs = parseFlag('--provider-check-timeout', timeoutText);
  if (timeoutMs < 0) throw new ConfigError('--provider-check-timeout', `must not be negative, got ${timeoutText}`);
  if (intervalMs > 0 && timeoutMs > intervalMs) {
    throw new ConfigError('--provider-check-timeout', `must not be longer than --provider-check-interval (${formatDuration(intervalMs)}), got ${timeoutText}`);
  }
  const derived = intervalMs > 0 ? Math.min(MAX_DEFAULT_CHECK_TIMEOUT_MS, intervalMs) : MAX_DEFAULT_CHECK_TIMEOUT_MS;
  return { intervalMs, timeoutMs: timeoutMs === 0 ? derived : timeoutMs };
}
