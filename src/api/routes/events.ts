import { Hono, type Context } from 'hono';
import { EVENT_KINDS, EVENT_REASONS, EVENT_TYPES, type EventQuery, type EventReader } from '../../events/event-sink.ts';
import { parseSince, SINCE_FORMS } from '../../events/since.ts';
import { BadRequestError } from '../http-errors.ts';

export interface EventRouteDeps {
  events: EventReader;
  now?: () => number;
}

/** Events a read returns by default, and at most. */
export const DEFAULT_EVENT_LIMIT = 500;
export const MAX_EVENT_LIMIT = 1000;

function quoted(value: string): string {
  return `"${value.slice(0, 100)}"`;
}

/** One value of a parameter that may appear once, at most `max` characters. */
function single(c: Context, name: string, max = 253): string | undefined {
  const values = c.req.queries(name);
  if (values === undefined) return undefined;
  if (values.length > 1) throw new BadRequestError(`query parameter "${name}" may be given once, got ${values.length}`);
  const value = values[0] ?? '';
  if (value === '' || value.length > max) throw new BadRequestError(`query parameter "${name}" must be 1 to ${max} characters, got ${quoted(value)}`);
  return value;
}

function oneOf<T extends string>(c: Context, name: string, allowed: readonly T[]): T | undefined {
  const value = single(c, name, 64);
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value))
    throw new BadRequestError(`query parameter "${name}" must be one of ${allowed.join(', ')}, got ${quoted(value)}`);
  return value as T;
}

/** The query of `GET /v1/events`, every parameter bounded; anything else is a 400 that names it. */
export function parseEventQuery(c: Context, now: number): EventQuery {
  const limitText = single(c, 'limit', 10);
  const limit = limitText === undefined ? DEFAULT_EVENT_LIMIT : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_EVENT_LIMIT)
    throw new BadRequestError(`query parameter "limit" must be an integer from 1 to ${MAX_EVENT_LIMIT}, got ${quoted(limitText ?? '')}`);
  const since = single(c, 'since', 64);
  const query: EventQuery = { limit };
  const proxy = single(c, 'proxy');
  const provider = single(c, 'provider');
  const type = oneOf(c, 'type', EVENT_TYPES);
  const reason = oneOf(c, 'reason', EVENT_REASONS);
  const kind = oneOf(c, 'kind', EVENT_KINDS);
  if (proxy !== undefined) query.proxy = proxy;
  if (provider !== undefined) query.provider = provider;
  if (type !== undefined) query.type = type;
  if (reason !== undefined) query.reason = reason;
  if (kind !== undefined) query.kind = kind;
  if (since !== undefined) {
    const parsed = parseSince(since, now);
    if (parsed === undefined) throw new BadRequestError(`query parameter "since" must be ${SINCE_FORMS}, got ${quoted(since)}`);
    query.since = parsed;
  }
  return query;
}

/** `GET /v1/events?proxy=&provider=&type=&reason=&kind=&since=&limit=`: `{items}`, oldest first. */
export function eventRoutes(deps: EventRouteDeps): Hono {
  const app = new Hono();
  app.get('/events', async (c) => {
    const query = parseEventQuery(c, (deps.now ?? Date.now)());
    return c.json({ items: await deps.events.list(query, c.req.raw.signal) });
  });
  return app;
}
