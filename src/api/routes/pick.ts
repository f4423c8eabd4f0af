import { Hono, type Context } from 'hono';
import { BudgetExhaustedError } from '../../pools/pick-budget.ts';
import { NoEligibleMemberError, type PoolPicker } from '../../pools/pick-service.ts';
import { parseDomain, parseSession, parseTier } from '../../pools/session-id.ts';
import { BadRequestError } from '../http-errors.ts';
import { readSignalOf } from '../read-deadline.ts';

export interface PickRouteDeps {
  picker: PoolPicker;
}

/** The optional query parameter `name`, refused when given twice (a client bug, not a choice). */
export function singleQuery(c: Context, name: string): string | undefined {
  const all = c.req.queries(name);
  if (all === undefined || all.length === 0) return undefined;
  if (all.length > 1) throw new BadRequestError(`query parameter "${name}" may be given once, got ${all.length}`);
  return all[0];
}

/**
 * `GET /v1/pools/{name}/pick?session=&domain=&tier=&format=json|text&scheme=http|socks5`: one Ready member's proxy URL with
 * its credentials (the permission discovery needs); with `tier`, only members whose `tier` label is
 * that (400 for a malformed tier). JSON also names the member, its tier, how the pick went and
 * where to send feedback about it. 404 for an unknown pool, 503 (with Retry-After) when no member
 * can be picked, saying why (none-ready, all-blocked, none-in-tier, budget-exhausted; `waking` when an
 * empty autoscaled pool is starting a member), 429 (Retry-After: until the budget's window turns) when
 * the pool's budget is spent and says stopPicks. HEAD answers the same statuses without picking.
 */
export function pickRoutes(deps: PickRouteDeps): Hono {
  const app = new Hono();
  app.get('/pools/:name/pick', async (c) => {
    const pool = c.req.param('name');
    const sessionText = singleQuery(c, 'session');
    const domainText = singleQuery(c, 'domain');
    const tierText = singleQuery(c, 'tier');
    const format = singleQuery(c, 'format') ?? 'json';
    if (format !== 'json' && format !== 'text') throw new BadRequestError(`query parameter "format" must be json or text, got "${format.slice(0, 40)}"`);
    const scheme = singleQuery(c, 'scheme') ?? 'http';
    if (scheme !== 'http' && scheme !== 'socks5') throw new BadRequestError(`query parameter "scheme" must be http or socks5, got "${scheme.slice(0, 40)}"`);
    // Every proxy speaks SOCKS5 on the same port with the same credentials.
    const urlOf = (proxyUrl: string): string => (scheme === 'socks5' ? proxyUrl.replace(/^http:\/\//, 'socks5://') : proxyUrl);
    const session = sessionText === undefined ? undefined : parseSession(sessionText);
    const domain = domainText === undefined ? undefined : parseDomain(domainText);
    const tier = tierText === undefined ? undefined : parseTier(tierText);
    c.header('Cache-Control', 'no-store');
    if (c.req.method === 'HEAD') {
      // Hono answers HEAD with the GET route; a HEAD must not consume a pick (a monitor's probe would move sessions'
      // neighbours in the round-robin), so it only says whether a pick would find a Ready member.
      const ready = await deps.picker.readyMembers(pool, readSignalOf(c), tier);
      if (ready > 0) return c.body(null, 200);
      c.header('Retry-After', '1');
      return c.body(null, 503);
    }
    try {
      const pick = await deps.picker.pick(pool, { session, domain, tier }, readSignalOf(c));
      if (format === 'text') return c.body(`${urlOf(pick.member.proxyUrl)}\n`, 200, { 'Content-Type': 'text/plain; charset=utf-8' });
      return c.json({
        pool: pick.pool,
        proxy: pick.member.name,
        proxyUrl: urlOf(pick.member.proxyUrl),
        outcome: pick.outcome,
        ...(pick.session ? { session: pick.session.id, sessionTtlSeconds: pick.session.ttlMs / 1000 } : {}),
        ...(domain ? { domain } : {}),
        ...(pick.member.tier === undefined ? {} : { tier: pick.member.tier }),
        feedbackUrl: `/v1/proxies/${pick.member.name}/feedback`,
      });
    } catch (err) {
      if (err instanceof BudgetExhaustedError) {
        c.header('Retry-After', String(err.budget.retryAfterSeconds));
        const { limit, window, retryAfterSeconds } = err.budget;
        return c.json({ error: err.code, message: err.message, budget: { limit, window, retryAfterSeconds } }, 429);
      }
      if (!(err instanceof NoEligibleMemberError)) throw err;
      c.header('Retry-After', String(err.retryAfterSeconds));
      return c.json({ error: err.code, reason: err.reason, message: err.message, ...(err.waking ? { waking: true } : {}) }, 503);
    }
  });
  /** `GET /v1/pools/{name}/sessions`: how many crawler sessions the pool holds now (picked within `--pick-session-ttl`). */
  app.get('/pools/:name/sessions', async (c) => {
    const pool = c.req.param('name');
    return c.json({ pool, live: await deps.picker.liveSessions(pool, readSignalOf(c)) });
  });
  return app;
}
