import { Hono } from 'hono';
import { NotFoundError } from '../../errors.ts';
import type { StatusStore } from '../../store/status-store.ts';
import { BadRequestError } from '../http-errors.ts';
import { releaseWriteDeadline } from '../write-deadline.ts';
import type { WorkRequests } from '../../work/work-requests.ts';

export interface ProviderHealthRouteDeps {
  store: StatusStore;
  providers: readonly string[];
  /** Where ad-hoc checks are asked for and awaited. */
  work: Pick<WorkRequests, 'checkProvider' | 'awaitCheck'>;
  /** How long `?wait=true` waits for a result. */
  waitMs: number;
}

function parseBool(name: string, value: string | undefined): boolean {
  if (value === undefined || value === 'false' || value === '0') return false;
  if (value === 'true' || value === '1' || value === '') return true;
  throw new BadRequestError(`query parameter "${name}" must be true or false, got "${value}"`);
}

/** `GET /v1/providerhealths[/{name}]` and `POST /v1/providers/{name}/checks[?wait=true]`. */
export function providerHealthRoutes(deps: ProviderHealthRouteDeps): Hono {
  const app = new Hono();
  app.get('/providerhealths', async (c) => c.json({ items: await deps.store.listProviderHealth() }));
  app.get('/providerhealths/:name', async (c) => {
    const name = c.req.param('name');
    const ph = await deps.store.getProviderHealth(name);
    if (!ph) throw new NotFoundError('providerhealth', name);
    return c.json(ph);
  });
  app.post('/providers/:name/checks', async (c) => {
    const name = c.req.param('name');
    const wait = parseBool('wait', c.req.query('wait'));
    if (!deps.providers.includes(name)) {
      throw new NotFoundError('provider', name);
    }
    const jobId = await deps.work.checkProvider(name);
    if (!wait) return c.json({ provider: name, jobId }, 202);
    // Enqueued: waiting for the result has a deadline of its own (504 ERR_CHECK_WAIT_TIMEOUT).
    releaseWriteDeadline(c);
    const result = await deps.work.awaitCheck(jobId, AbortSignal.any([c.req.raw.signal, AbortSignal.timeout(deps.waitMs)]));
    return c.json({ provider: name, jobId, result });
  });
  return app;
}
