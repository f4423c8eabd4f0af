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

// ---------------------------------------------------------------------------------------------
// One wording for every validation message a user reads (the configuration file, Proxy
// documents), the same as the flags': `<where>: expected <what>, got <value>`, or a plain
// statement (`required`, `unknown key "colour"`, `must not be empty`). zod's own wording
// ("Invalid input: expected string, received number", "Too small: …") never reaches a user: the
// error map below words every issue zod makes, and a message a schema gives itself is kept.

const MAX_SHOWN = 60;

const TYPE_NAMES: Record<string, string> = {
  int: 'an integer',
  array: 'an array',
  object: 'an object',
  undefined: 'nothing',
};

/** `a string`, `an integer`, `an object`: a type as the messages name it. */
function typeName(type: string): string {
  return TYPE_NAMES[type] ?? `${/^[aeiou]/.test(type) ? 'an' : 'a'} ${type}`;
}

/** A value as a message shows it after `got`: strings quoted (and cut), scalars as written, the rest by kind. */
export function shownValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > MAX_SHOWN ? `${value.slice(0, MAX_SHOWN)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  return typeName(typeof value);
}

function quoted(values: readonly unknown[]): string {
  return values.map((v) => (typeof v === 'string' ? v : String(v))).join(', ');
}

function count(n: number | bigint, unit: string): string {
  return `${String(n)} ${unit}${Number(n) === 1 ? '' : 's'}`;
}

function sizeOf(input: unknown): string {
  if (typeof input === 'string') return count(input.length, 'character');
  if (Array.isArray(input)) return count(input.length, 'item');
  return shownValue(input);
}

function bound(issue: z.core.$ZodRawIssue<z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig>, limit: number | bigint, least: boolean): string {
  const word = least ? (issue.inclusive === false ? 'more than' : 'at least') : issue.inclusive === false ? 'less than' : 'at most';
  if (issue.origin === 'string') {
    if (least && Number(limit) === 1 && issue.inclusive !== false) return 'must not be empty';
    return `expected ${word} ${count(limit, 'character')}, got ${sizeOf(issue.input)}`;
  }
  if (issue.origin === 'array' || issue.origin === 'set') {
    if (least && Number(limit) === 1 && issue.inclusive !== false) return 'must not be empty';
    return `expected ${word} ${count(limit, 'item')}, got ${sizeOf(issue.input)}`;
  }
  return `expected ${word} ${String(limit)}, got ${shownValue(issue.input)}`;
}

/** The wording of one issue zod raised, for the error map (`undefined`: zod's own, never expected). */
function projectMessage(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'required';
      return `expected ${typeName(issue.expected)}, got ${shownValue(issue.input)}`;
    case 'too_small':
      return bound(issue, issue.minimum, true);
    case 'too_big':
      return bound(issue, issue.maximum, false);
    case 'invalid_value':
      return issue.values.length === 1
        ? `expected ${shownValue(issue.values[0])}, got ${shownValue(issue.input)}`
        : `expected one of ${quoted(issue.values)}, got ${shownValue(issue.input)}`;
    case 'invalid_format':
      if (issue.format === 'url') return `expected a URL, got ${shownValue(issue.input)}`;
      if (issue.format === 'regex') return `expected text matching ${String((issue as { pattern?: unknown }).pattern)}, got ${shownValue(issue.input)}`;
      return `expected ${typeName(issue.format)}, got ${shownValue(issue.input)}`;
    case 'not_multiple_of':
      return `expected a multiple of ${String(issue.divisor)}, got ${shownValue(issue.input)}`;
    case 'unrecognized_keys':
      return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
    case 'invalid_key':
      return `not an accepted key: ${issue.issues[0]?.message ?? 'invalid'}`;
    case 'invalid_element':
      return `not an accepted entry: ${issue.issues[0]?.message ?? 'invalid'}`;
    case 'invalid_union': {
      const raw = issue;
      if (raw.discriminator) {
        const options = quoted(Array.isArray(raw.options) ? (raw.options as unknown[]) : []);
        const value = raw.input && typeof raw.input === 'object' ? (raw.input as Record<string, unknown>)[raw.discriminator] : undefined;
        return value === undefined ? `required: one of ${options}` : `expected one of ${options}, got ${shownValue(value)}`;
      }
      // A union of types (a number or a string): name them.
      const types = raw.errors.flatMap((branch) =>
        branch.length === 1 && branch[0]?.code === 'invalid_type' && branch[0].path.length === 0 ? [branch[0].expected] : [],
      );
      if (raw.input === undefined) return 'required';
      if (types.length === raw.errors.length && types.length > 0) return `expected ${types.map(typeName).join(' or ')}, got ${shownValue(raw.input)}`;
      // The value has the type of one branch but breaks its rules (-5 for a duration): that branch's message.
      const typed = raw.errors.filter((branch) => !(branch.length === 1 && branch[0]?.code === 'invalid_type' && branch[0].path.length === 0));
      const only = typed.length === 1 ? typed[0]?.[0] : undefined;
      if (only && only.path.length === 0) return only.message;
      return `matches none of the accepted forms, got ${shownValue(raw.input)}`;
    }
    case 'custom':
      return undefined;
  }
}

/** The project's error map for zod: pass it to `safeParse` as `{ error: projectErrorMap }`. */
export const projectErrorMap: z.core.$ZodErrorMap = (issue) => projectMessage(issue);

/**
 * One line per issue, `<path>: <message>`. A message a schema worded itself ("expected a CIDR
 * range…") gets the offending value too, as the project's own messages have it.
 */
export function issueLines(error: z.core.$ZodError): string[] {
  return error.issues.map((issue) => {
    const path = formatPath(issue.path);
    let message = issue.message;
    if (message.startsWith('expected ') && !message.includes(', got ') && 'input' in issue && issue.input !== undefined) {
      message += `, got ${shownValue(issue.input)}`;
    }
    return `${path ? `${path}: ` : ''}${message}`;
  });
}

/** Parses with the project's wording: on failure, one line per issue (see `issueLines`). */
export function safeParseWorded<T extends z.ZodType>(
  schema: T,
  value: unknown,
): { ok: true; data: z.output<T> } | { ok: false; lines: string[]; error: z.core.$ZodError } {
  const result = schema.safeParse(value, { error: projectErrorMap, reportInput: true });
  return result.success ? { ok: true, data: result.data } : { ok: false, lines: issueLines(result.error), error: result.error };
}
