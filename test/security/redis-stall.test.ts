import { writeFile } from 'node:fs/promises';
import { request, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startRedisChild, type RedisChild } from '../../src/redis/redis-server.ts';
import { PickKeys } from '../../src/pools/pick-keys.ts';
import { routeTable, type Route } from '../support/api-route-table.ts';
import { spawnEgress, type EgressProcess } from '../support/cli.ts';
import { uniquePrefix } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';
import { PoolFixture } from '../pools/pick-support.ts';

/**
 * Every route of the API (its route table, Bull Board's included) while the API's Redis is frozen
 * with SIGSTOP: a Redis of this test's own, never the run's shared one. The socket stays open, so
 * ioredis queues every command until the server resumes. Each answer must come within its
 * deadline (reads 3 s, writes 10 s) as a 503 ERR_STORE_UNAVAILABLE with Retry-After (or, for the
 * routes that need no Redis, as before); the client gives up at four times the deadline, so a hang
 * fails the test. Then Redis resumes, and every write answered 503 `write: not-applied` is proven
 * not applied.
 */

const READ_DEADLINE_MS = 3000;
const WRITE_DEADLINE_MS = 10_000;
const TOKEN = 'stall-test-token-0123456789';

/**
 * Routes that cannot answer without Redis: they must answer 503. Every other route (/healthz, the
 * echo, Bull Board's UI and the parts of its API that read no queue or refuse the request first)
 * answers below 500, or with the same 503.
 */
const needsStore = (r: Route): boolean =>
  (r.path.startsWith('/v1/') && r.path !== '/v1/echo') ||
  ['/readyz', '/metrics', '/admin/queues/api/queues', '/admin/queues/api/queues/:queueName/add'].includes(r.path);

/** Writes whose every store write is fenced: a 503 says `not-applied`. The rest are queue operations (`unknown`). */
const FENCED = [/^\/v1\/proxies/, /^\/v1\/pools/];

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: Record<string, unknown> | undefined;
}

function send(base: string, method: string, path: string, body: string | undefined, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, base),
      {
        method,
        agent: false /* a connection of its own per request */,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }),
        },
        // Four times the route's deadline: a hang fails the test by aborting, no clock is asserted.
        signal: AbortSignal.timeout(timeoutMs),
      },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: Record<string, unknown> | undefined;
          try {
            parsed = JSON.parse(text) as Record<string, unknown>;
          } catch {
            parsed = { text: text.slice(0, 200) };
          }
          const retryAfter = res.headers['retry-after'];
          resolve({ status: res.statusCode ?? 0, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, body: parsed });
        });
      },
    );
    req.on('error', (err) => reject(new Error(`${method} ${path}: ${err.message}`)));
    req.end(body);
  });
}

const PARAMS: Record<string, string> = { name: 'x', queueName: 'checks', jobId: 'stall-job-1', id: 'stall-job-1', queueStatus: 'failed' };

/** A concrete request for a route: its parameters filled with names that exist, a body that would be applied. */
function requestFor(route: Route): { method: string; path: string; body: string | undefined } {
  let path = route.path.replace(/:([A-Za-z]+)/g, (_, p: string) => PARAMS[p] ?? 'x').replace(/\*$/, 'x');
  if (path.startsWith('/v1/proxies/x')) path = path.replace('/v1/proxies/x', '/v1/proxies/x-aaaaa');
  if (path.startsWith('/v1/providers/x')) path = path.replace('/v1/providers/x', '/v1/providers/local');
  if (route.method === 'GET' || route.method === 'HEAD' || route.method === 'DELETE') return { method: route.method, path, body: undefined };
  let body: string | undefined;
  if (route.path === '/v1/proxies') body = JSON.stringify({ metadata: { name: 'stall-new' }, spec: { provider: 'local' } });
  else if (route.path === '/v1/pools')
    body = JSON.stringify({ kind: 'ProxyPool', metadata: { name: 'stall-pool' }, spec: { replicas: 1, template: { spec: { provider: 'local' } } } });
  else if (route.path === '/v1/proxies/:name/feedback') body = JSON.stringify({ outcome: 'blocked', domain: 'stall-proxy.example' });
  else if (route.path === '/v1/pools/:name/feedback') body = JSON.stringify({ outcome: 'blocked', domain: 'stall-pool.example', session: 's1' });
  else if (route.path.endsWith('/add')) body = JSON.stringify({ name: 'stall-added', data: {} });
  else body = '{}';
  return { method: route.method, path, body };
}

describe('the API while its own Redis is stalled (SIGSTOP)', () => {
  let redis: RedisChild;
  let fixture: PoolFixture;
  let proc: EgressProcess;
  let base: string;
  let routes: Route[];
  const prefix = uniquePrefix();

  beforeAll(async () => {
    routes = await routeTable();
    const dir = await tempDir('egress-stall-');
    redis = await startRedisChild({ dir: join(dir, 'redis'), appendOnly: false });
    fixture = new PoolFixture(prefix, redis.url);
    await fixture.pool('x', 1);
    await fixture.member('x', 'x-aaaaa', 'http://127.0.0.1:4999');
    const configFile = join(dir, 'egress.yaml');
    await writeFile(configFile, 'providers:\n  - { name: local, type: local }\n');
    const tokenFile = join(dir, 'tokens');
    await writeFile(tokenFile, `stall:${TOKEN}\n`, { mode: 0o600 });
    proc = spawnEgress(['api', '--config', configFile, '--port', '0', '--prefix', prefix, '--api-token-file', tokenFile], {
      REDIS_URL: redis.url,
      EGRESS_LOG_LEVEL: 'info',
    });
    await proc.waitForLog('"msg":"api listening"');
    base = /"url":"(http:\/\/[^"]+)"/.exec(proc.logs())?.[1] ?? 'http://invalid';
    // A session holding the member, so pool feedback reaches the store.
    expect((await send(base, 'GET', '/v1/pools/x/pick?session=s1', undefined, 10_000)).status).toBe(200);
  });
  afterAll(async () => {
    try {
      process.kill(redis.pid, 'SIGCONT');
    } catch {
      // not running
    }
    await proc?.stop();
    await fixture?.close();
    await redis?.stop();
  });

  test('every route answers within its deadline: 503 ERR_STORE_UNAVAILABLE with Retry-After; no write answered not-applied is applied later', async () => {
    const plans = routes.map((r) => ({ route: r, ...requestFor(r) }));
    expect(plans.map((p) => `${p.method} ${p.route.path}`)).toEqual(
      expect.arrayContaining([
        'GET /v1/pools/:name/pick',
        'POST /v1/proxies',
        'DELETE /v1/pools/:name',
        'POST /v1/pools/:name/feedback',
        'POST /v1/jobs/:id/retry',
      ]),
    );
    process.kill(redis.pid, 'SIGSTOP');
    let answers: Answer[];
    try {
      answers = await Promise.all(
        plans.map((p) => {
          const write = p.method !== 'GET' && p.method !== 'HEAD';
          return send(base, p.method, p.path, p.body, 4 * (write ? WRITE_DEADLINE_MS : READ_DEADLINE_MS));
        }),
      );
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    const wrong = plans.flatMap((p, i) => {
      const a = answers[i] as Answer;
      const what = `${p.method} ${p.path} → ${a.status} ${JSON.stringify(a.body ?? {}).slice(0, 300)} retry-after=${a.retryAfter}`;
      if (!needsStore(p.route) && a.status < 500) return [];
      if (p.route.path === '/readyz') return a.status === 503 && a.retryAfter !== undefined ? [] : [what];
      if (a.status !== 503 || a.retryAfter === undefined) return [what];
      if (p.method === 'HEAD') return [];
      if (a.body?.error !== 'ERR_STORE_UNAVAILABLE') return [what];
      if (p.method === 'GET') return [];
      const expected = FENCED.some((re) => re.test(p.path)) ? 'not-applied' : 'unknown';
      return a.body.write === expected && Array.isArray(a.body.items) && a.body.items.length === 0 ? [] : [`${what} (expected write: ${expected})`];
    });
    expect(wrong).toEqual([]);

    // Redis answers again: once a read through the API succeeds, the commands queued before it have run.
    await waitFor('the API to read from Redis again', async () => (await send(base, 'GET', '/v1/proxies', undefined, 10_000)).status === 200);
    await waitFor('the API to read its queues again', async () => (await send(base, 'GET', '/v1/jobs', undefined, 10_000)).status === 200);
    expect(await fixture.proxies.get('stall-new')).toBeUndefined();
    expect((await fixture.proxies.get('x-aaaaa'))?.metadata.deletionRequestedAt).toBeUndefined();
    expect(await fixture.pools.get('stall-pool')).toBeUndefined();
    expect((await fixture.pools.get('x'))?.metadata.deletionRequestedAt).toBeUndefined();
    const keys = new PickKeys(prefix);
    expect(await fixture.redis.hgetall(`${prefix}:pool-replace:x`)).toEqual({});
    expect(await fixture.redis.zrange(keys.blocked('x', 'stall-pool.example'), 0, -1)).toEqual([]);
    expect(await fixture.redis.zrange(keys.blockedDomains('x-aaaaa'), 0, -1)).toEqual([]);
    expect(await fixture.redis.exists(keys.rate('stall'))).toBe(0);
    // The session survived: the pool feedback that would have let it go was not applied.
    expect(await fixture.redis.get(keys.session('x', 's1'))).toBe('x-aaaaa');
  });
});
