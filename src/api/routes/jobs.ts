import { Hono } from 'hono';
import { JOB_STATES, type JobInspector, type JobState } from '../../jobs/job-inspection.ts';
import { BadRequestError } from '../http-errors.ts';

function parseStates(value: string | undefined): JobState[] {
  if (value === undefined || value === '') return ['failed', 'active', 'waiting', 'delayed'];
  return value.split(',').map((s) => {
    if (!(JOB_STATES as readonly string[]).includes(s)) {
      throw new BadRequestError(`query parameter "state" must be one of ${JOB_STATES.join(', ')}; got "${s}"`);
    }
    return s as JobState;
  });
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
