import { Hono } from 'hono';
import { JOB_STATES, type JobInspector, type JobState } from '../../jobs/job-inspection.ts';
import { BadRequestError } from '../http-errors.ts';

/** `?state=a,b`: known states only, each once, so a long list costs at most one read per known state and queue. */
function parseStates(value: string | undefined): JobState[] {
  if (value === undefined || value === '') return ['failed', 'active', 'waiting', 'delayed'];
  const states = [...new Set(value.split(',').map((s) => s.trim()))];
  const unknown = states.filter((s) => !(JOB_STATES as readonly string[]).includes(s));
  if (unknown.length > 0) {
    const named = unknown
      .slice(0, 5)
      .map((s) => `"${s.slice(0, 40)}"`)
      .join(', ');
    const more = unknown.length > 5 ? ` and ${unknown.length - 5} more` : '';
    throw new BadRequestError(`query parameter "state" must be a comma-separated list of ${JOB_STATES.join(', ')}; unknown: ${named}${more}`);
  }
  return states as JobState[];
}

function parseLimit(value: string | undefined): number {
  if (value === undefined) return 100;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new BadRequestError(`query parameter "limit" must be an integer from 1 to 1000; got "${value}"`);
  return n;
}

/** `GET /v1/jobs`, `POST /v1/jobs/{id}/retry`, `POST /v1/jobs/retry-failed`. */
export function jobRoutes(inspector: JobInspector): Hono {
  const app = new Hono();
  app.get('/jobs', async (c) => {
    const items = await inspector.list(parseStates(c.req.query('state')), c.req.query('queue'), parseLimit(c.req.query('limit')));
    return c.json({ items });
  });
  app.post('/jobs/retry-failed', async (c) => c.json({ retried: await inspector.retryAllFailed(c.req.query('queue')) }));
  app.post('/jobs/:id/retry', async (c) => c.json(await inspector.retry(c.req.param('id'), c.req.query('queue'))));
  return app;
}
