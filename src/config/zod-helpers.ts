import { z } from 'zod';
import { parseDuration } from './duration.ts';

/** A duration field: a number of milliseconds or a string like `30s`; the parsed value is milliseconds. */
export const durationMs = z.union([z.number().int().nonnegative(), z.string()]).transform((value, ctx) => {
  if (typeof value === 'number') return value;
  const ms = parseDuration(value);
  if (ms === undefined || ms < 0) {
    ctx.addIssue({ code: 'custom', message: `expected a duration such as 30s or 5m, got "${value}"` });
    return z.NEVER;
  }
  return ms;
});

/** A provider or host name: usable in metric labels, job ids and Redis keys. */
export const resourceName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'expected a lower-case name of letters, digits and dashes')
  .max(63);

/** Renders a zod issue path the way users write it: `providers[1].hosts[0].port`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out;
}
