import { Hono, type Context } from 'hono';
import { parseUsageTime, USAGE_TIME_FORMS } from '../../usage/usage-dates.ts';
import { USAGE_GROUP_BY, type UsageQuery, type UsageStore } from '../../usage/usage-store.ts';
import type { UsageGroupBy } from '../../usage/usage-types.ts';
import { checkWindow, DAY_MS, UsageWindowError } from '../../usage/usage-window.ts';
import { BadRequestError } from '../http-errors.ts';

export interface UsageRouteDeps {
  usage: Pick<UsageStore, 'query'>;
  now?: () => number;
}

/** The window without `from`: this many days before `to`. */
export const DEFAULT_USAGE_DAYS = 7;

function quoted(value: string): string {
  return `"${value.slice(0, 100)}"`;
}

/** One value of a parameter that may appear once, 1 to 64 characters. */
function single(c: Context, name: string): string | undefined {
  const values = c.req.queries(name);
  if (values === undefined) return undefined;
  if (values.length > 1) throw new BadRequestError(`query parameter "${name}" may be given once, got ${values.length}`);
  const value = values[0] ?? '';
  if (value === '' || value.length > 64) throw new BadRequestError(`query parameter "${name}" must be 1 to 64 characters, got ${quoted(value)}`);
  return value;
}

function time(c: Context, name: 'from' | 'to'): Date | undefined {
  const text = single(c, name);
  if (text === undefined) return undefined;
  const at = parseUsageTime(text, name === 'to');
  if (at === undefined) throw new BadRequestError(`query parameter "${name}" must be ${USAGE_TIME_FORMS}, got ${quoted(text)}`);
  return at;
}

/** The query of `GET /v1/usage`; anything out of bounds is a 400 that names the parameter. */
export function parseUsageQuery(c: Context, nowMs: number): UsageQuery {
  const groupBy = single(c, 'groupBy') ?? 'pool';
  if (!(USAGE_GROUP_BY as readonly string[]).includes(groupBy))
    throw new BadRequestError(`query parameter "groupBy" must be one of ${USAGE_GROUP_BY.join(', ')}, got ${quoted(groupBy)}`);
  const to = time(c, 'to') ?? new Date(nowMs);
  const from = time(c, 'from') ?? new Date(to.getTime() - DEFAULT_USAGE_DAYS * DAY_MS);
  try {
    checkWindow(from, to);
  } catch (err) {
    if (err instanceof UsageWindowError) throw new BadRequestError(`query parameters "from" and "to": ${err.message}`);
    throw err;
  }
  return { from, to, groupBy: groupBy as UsageGroupBy };
}

/** `GET /v1/usage?from=&to=&groupBy=pool|provider|domain|location|machineType`: rows per day and key with cost, and totals. */
export function usageRoutes(deps: UsageRouteDeps): Hono {
  const app = new Hono();
  app.get('/usage', async (c) => {
    const query = parseUsageQuery(c, (deps.now ?? Date.now)());
    return c.json(await deps.usage.query(query, c.req.raw.signal));
  });
  return app;
}
