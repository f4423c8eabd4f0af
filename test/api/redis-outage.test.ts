import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ShutdownError } from '../../src/roles/role-lifecycle.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { freezeConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import { startRedisChild, type RedisChild } from '../../src/redis/redis-server.ts';
import { testConfig } from '../support/config.ts';
import { rawRequest } from '../support/raw-http.ts';
import { waitFor } from '../support/wait.ts';

/**
 * A Redis of this test's own (not the run's shared one), frozen with SIGSTOP and then killed:
 * /readyz and reads must answer 503 within their deadlines instead of hanging. Each request
 * carries a 6 s deadline of its own: the unfixed server hung for as long as the outage lasted.
 */
describe('the API while Redis is away', () => {
  let dir: string;
  let redis: RedisChild;
  let roles: RunningRoles;
  let api: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'egress-outage-'));
    redis = await startRedisChild({ dir, appendOnly: false });
    const base = testConfig();
    roles = await runRoles(freezeConfig({ ...base, redis: { ...base.redis, url: redis.url } }), ['api'], silentLogger());
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    try {
      process.kill(redis.pid, 'SIGCONT');
    } catch {
      // already gone
    }
    // Bring Redis back on its port so that every connection closes cleanly and nothing is left
    // reconnecting in the test process.
    if (
      !(await get('/readyz').then(
        (r) => r.status === 200,
        () => false,
      ))
    )
      redis = await startRedisChild({ dir, appendOnly: false, port: redis.port });
    // After an outage BullMQ's QueueEvents may not close on its blocked reader: the shutdown
    // drops its connections in bounds and reports it (a ShutdownError); anything else is a failure.
    await roles.close().catch((err: unknown) => {
      if (!(err instanceof ShutdownError)) throw err;
    });
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  });

  // No client deadline: the API's own store deadline makes the 503; a request that never answers fails at the test's timeout.
  const get = (path: string) => rawRequest(api + path);

  test('a frozen Redis (SIGSTOP): /readyz and reads answer 503, then recover', async () => {
    expect((await get('/readyz')).status).toBe(200);
    expect((await get('/v1/proxies')).status).toBe(200);
    process.kill(redis.pid, 'SIGSTOP');
    try {
      const ready = await get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.json()).toMatchObject({ error: 'NotReady', message: expect.stringMatching(/^redis is not reachable/) as unknown });
      for (const path of ['/v1/proxies', '/v1/providerhealths', '/v1/jobs']) {
        const res = await get(path);
        expect(res.status, path).toBe(503);
        expect(res.json<{ error: string; message: string }>().error, path).toBe('ERR_STORE_UNAVAILABLE');
      }
      expect((await get('/healthz')).status).toBe(200);
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    await waitFor('/readyz to answer 200 again', async () => (await get('/readyz')).status === 200);
    expect((await get('/v1/proxies')).status).toBe(200);
  });

  test('a dead Redis: /readyz and reads answer 503 instead of hanging', async () => {
    await redis.stop();
    const ready = await get('/readyz');
    expect(ready.status).toBe(503);
    for (const path of ['/v1/proxies', '/v1/providerhealths', '/v1/jobs', '/admin/queues/api/queues']) {
      const res = await get(path);
      expect(res.status, path).toBe(503);
      expect(res.json<{ error: string }>().error, path).toBe('ERR_STORE_UNAVAILABLE');
    }
  });
});
