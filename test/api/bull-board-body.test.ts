import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import { testConfig } from '../support/config.ts';

const TOKEN = 'bull-board-token-0123456789';

/**
 * Bull Board's adapter reads a body it cannot parse as `{}` and acts on it: a truncated add-job
 * body queued a job with no name. Such bodies are refused with a 400 that says why, and nothing
 * is queued; a whole body still adds its job.
 */
describe('Bull Board request bodies', () => {
  let roles: RunningRoles;
  let api: string;
  let checks: Queue;

  beforeAll(async () => {
    const config = testConfig({ tokens: [TOKEN] });
    roles = await runRoles(config, ['api'], silentLogger());
    api = roles.api?.url ?? '';
    checks = new Queue(QUEUES.checks, { connection: redisOptions(inject('redisUrl'), 'producer'), prefix: config.redis.prefix });
  });
  afterAll(async () => {
    await checks.close();
    await roles.close();
  });

  const post = (path: string, body: string) =>
    fetch(`${api}/admin/queues/api/queues/checks${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body,
    });

  test.each([
    ['a truncated JSON body', '{"name":"check","data":{"provider":"loc', /^Bull Board request refused, nothing done: the body is not valid JSON/],
    ['no body', '', /a JSON object naming the job/],
    ['an empty name', '{"name":"","data":{}}', /field "name": a job needs a non-empty name/],
    ['no name', '{"data":{}}', /field "name"/],
  ])('add with %s: 400, nothing queued', async (_what, body, message) => {
    const res = await post('/add', body);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'ERR_BAD_REQUEST', message: expect.stringMatching(message) as unknown });
    expect(await checks.count()).toBe(0);
  });

  test('a malformed body on another of its routes is refused too; a whole add body queues its job', async () => {
    const retry = await fetch(`${api}/admin/queues/api/queues/checks/retry/failed`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: '{"x":',
    });
    expect(retry.status).toBe(400);
    const res = await post('/add', JSON.stringify({ name: 'check', data: { provider: 'local', trigger: 'adhoc' } }));
    expect(res.status).toBe(200);
    expect((await checks.getJobs(['waiting', 'prioritized', 'delayed'])).map((j) => j.name)).toEqual(['check']);
  });
});
