import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { createMiddleware } from 'hono/factory';
import { z } from 'zod';
import { NotFoundError } from '../../errors.ts';
import { callerName } from '../../http/auth.ts';
import { refuse } from '../../http/request-guards.ts';
import { FEEDBACK_OUTCOMES, type FeedbackRecorder } from '../../pools/feedback-service.ts';
import type { FeedbackRateLimit } from '../../pools/feedback-rate-limit.ts';
import type { PoolPicker } from '../../pools/pick-service.ts';
import { DOMAIN_MAX, parseDomain, parseSession, SESSION_MAX } from '../../pools/session-id.ts';
import { safeParseWorded } from '../../schema/zod-helpers.ts';
import { BadRequestError } from '../http-errors.ts';
import { fencedWrite, writeApplied } from '../write-deadline.ts';

export interface FeedbackRouteDeps {
  feedback: FeedbackRecorder;
  picker: PoolPicker;
  rateLimit: FeedbackRateLimit;
}

/** A report is a few dozen bytes; anything much larger is not one. */
export const FEEDBACK_MAX_BYTES = 1024;

const outcome = z.enum(FEEDBACK_OUTCOMES);
const proxyReport = z.strictObject({ outcome, domain: z.string().max(DOMAIN_MAX + 1) });
const poolReport = z.strictObject({ outcome, domain: z.string().max(DOMAIN_MAX + 1), session: z.string().max(SESSION_MAX) });

function isJson(c: Context): boolean {
  return (c.req.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase() === 'application/json';
}

const notJson = (c: Context): Response => refuse(c, 415, 'ERR_UNSUPPORTED_MEDIA_TYPE', 'a feedback body must be application/json');

/** The body as strict JSON (no YAML here), validated: 400 naming each field that is wrong. */
async function readReport<T extends z.ZodType>(c: Context, schema: T): Promise<z.output<T>> {
  const text = await c.req.text();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new BadRequestError(`the body is not valid JSON: ${(err as Error).message.slice(0, 200)}`);
  }
  const parsed = safeParseWorded(schema, value);
  if (!parsed.ok) throw new BadRequestError(parsed.lines.join('; ').slice(0, 1000));
  return parsed.data;
}

/**
 * `POST /v1/proxies/{name}/feedback` `{outcome, domain}` and `POST /v1/pools/{name}/feedback`
 * `{outcome, domain, session}` (the member the session holds; a crawler need not know its name).
 * Rate-limited per token (429 with Retry-After), bodies of at most 1 KiB, strict JSON.
 */
export function feedbackRoutes(deps: FeedbackRouteDeps): Hono {
  const app = new Hono();
  const limit = bodyLimit({
    maxSize: FEEDBACK_MAX_BYTES,
    onError: (c) => refuse(c, 413, 'ERR_BODY_TOO_LARGE', `a feedback body is at most ${FEEDBACK_MAX_BYTES} bytes`),
  });
  const guard = createMiddleware(async (c, next) => {
    const waitMs = await deps.rateLimit.take(callerName(c), fencedWrite(c));
    if (waitMs > 0) {
      c.header('Retry-After', String(Math.max(1, Math.ceil(waitMs / 1000))));
      return c.json({ error: 'ERR_RATE_LIMITED', message: 'too many feedback reports for this token (--feedback-rate, --feedback-burst); retry later' }, 429);
    }
    await next();
  });

  app.post('/proxies/:name/feedback', guard, limit, async (c) => {
    if (!isJson(c)) return notJson(c);
    const body = await readReport(c, proxyReport);
    const domain = parseDomain(body.domain);
    const name = c.req.param('name');
    const result = await deps.feedback.report(name, { outcome: body.outcome, domain }, callerName(c), undefined, fencedWrite(c), () =>
      writeApplied(c, { proxy: name, report: 'recorded' }),
    );
    return c.json(result);
  });

  app.post('/pools/:name/feedback', guard, limit, async (c) => {
    if (!isJson(c)) return notJson(c);
    const body = await readReport(c, poolReport);
    const domain = parseDomain(body.domain);
    const session = parseSession(body.session);
    const pool = c.req.param('name');
    const signal = fencedWrite(c);
    const member = await deps.picker.memberOf(pool, session, signal);
    if (member === undefined) throw new NotFoundError(`session (expired, or never picked) of pool "${pool}"`, session);
    const result = await deps.feedback.report(member, { outcome: body.outcome, domain }, callerName(c), { pool, session }, signal, () =>
      writeApplied(c, { proxy: member, report: 'recorded' }),
    );
    return c.json(result);
  });
  return app;
}
