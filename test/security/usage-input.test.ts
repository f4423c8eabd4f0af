/**
 * `GET /v1/usage` through the API's own app (createApiApp, its guards and error answers) over a
 * memory usage store: the answer's shape, the defaults, the date forms, and every hostile input a
 * 400 naming the parameter (test/security/api-fuzz.test.ts adds random ones against `egress api`).
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { createApiApp } from '../../src/api/app.ts';
import { HostAllowList } from '../../src/http/request-guards.ts';
import { silentLogger } from '../../src/logging.ts';
import { MemoryUsageStore } from '../../src/usage/memory-usage-store.ts';
import { priceTableSchema } from '../../src/usage/prices.ts';
import { uniquePrefix } from '../support/config.ts';

const NOW = Date.parse('2026-11-08T12:00:00Z');

describe('GET /v1/usage', () => {
  let app: ReturnType<typeof createApiApp>;
  let checks: Queue;
  const usage = new MemoryUsageStore({ now: () => NOW, prices: priceTableSchema.parse({ currency: 'EUR', egressGB: { gcp: 1 } }) });

  beforeAll(async () => {
    checks = new Queue('checks', { connection: redisOptions(inject('redisUrl'), 'producer'), prefix: uniquePrefix() });
    const never = (): never => {
      throw new Error('not called');
    };
    app = createApiApp({
      store: never as never,
      proxies: never as never,
      pools: never as never,
      replacements: never as never,
      providers: ['gcp'],
      checks,
      checkEvents: never as never,
      queues: [checks],
      inspector: never as never,
      registry: never as never,
      tokens: ['t0ken-usage'],
      events: never as never,
      usage,
      maxBodyBytes: 1024,
      hosts: new HostAllowList([]),
      ping: never,
      storeConnected: () => true,
      checkWaitMs: 1,
      logger: silentLogger(),
    });
    await usage.addTraffic([
      {
        hour: '2026-11-01T10:00:00.000Z',
        proxy: 'p',
        pool: 'crawl',
        provider: 'gcp',
        domain: 'a.com',
        counts: { bytesUp: 5e8, bytesDown: 5e8, requests: 3, tunnels: 1 },
      },
      {
        hour: '2026-11-07T23:00:00.000Z',
        proxy: 'p',
        pool: 'crawl',
        provider: 'gcp',
        domain: 'b.com',
        counts: { bytesUp: 0, bytesDown: 2e9, requests: 1, tunnels: 0 },
      },
    ]);
    await usage.instanceStarted({
      instance: 'i',
      proxy: 'p',
      pool: 'crawl',
      provider: 'gcp',
      location: 'z',
      machineType: 'm',
      startedAt: '2026-11-07T12:00:00.000Z',
    });
  });
  afterAll(() => checks.close());

  const get = (query: string) => app.request(`http://127.0.0.1/v1/usage${query}`, { headers: { authorization: 'Bearer t0ken-usage' } });

  test('rows per day and key with cost and totals', async () => {
    const res = await get('?from=2026-11-01&to=2026-11-07&groupBy=pool');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      from: '2026-11-01T00:00:00.000Z',
      to: '2026-11-08T00:00:00.000Z',
      groupBy: 'pool',
      currency: 'EUR',
      rows: [
        {
          day: '2026-11-01',
          key: 'crawl',
          bytesUp: 5e8,
          bytesDown: 5e8,
          requests: 3,
          tunnels: 1,
          instanceSeconds: 0,
          instances: 0,
          cost: { instances: 0, egress: 1, vendor: 0, ipv4: 0, total: 1 },
        },
        {
          day: '2026-11-07',
          key: 'crawl',
          bytesUp: 0,
          bytesDown: 2e9,
          requests: 1,
          tunnels: 0,
          instanceSeconds: 43_200,
          instances: 1,
          cost: { instances: 0, egress: 2, vendor: 0, ipv4: 0, total: 2 },
        },
      ],
      totals: {
        bytesUp: 5e8,
        bytesDown: 2.5e9,
        requests: 4,
        tunnels: 1,
        instanceSeconds: 43_200,
        instances: 1,
        cost: { instances: 0, egress: 3, vendor: 0, ipv4: 0, total: 3 },
      },
    });
  });

  test('defaults: the last 7 days to now, by pool; RFC 3339 times with offsets', async () => {
    const body = (await (await get('')).json()) as { from: string; to: string; groupBy: string };
    expect(body.groupBy).toBe('pool');
    expect(Date.parse(body.to) - Date.parse(body.from)).toBe(7 * 86_400_000);
    const r = (await (await get('?from=2026-11-07T23:30:00%2B01:00&to=2026-11-08T00:00:00Z&groupBy=domain')).json()) as {
      from: string;
      rows: { key: string }[];
    };
    expect(r.from).toBe('2026-11-07T22:30:00.000Z');
    expect(r.rows.map((x) => x.key)).toEqual(['b.com']);
  });

  test.each([
    ['?from=yesterday', /"from" must be an RFC 3339 time .* got "yesterday"/],
    ['?to=2026-02-30', /"to" must be .* got "2026-02-30"/],
    ['?from=2026-11-01T25:00:00Z', /"from"/],
    ['?from=2026-11-01T10:00:00', /"from"/],
    ['?from=2026-11-01T10:00:00%2B24:00', /"from"/],
    ['?from=99999-01-01', /"from"/],
    ['?from=1969-12-31', /"from"/],
    [`?from=${'9'.repeat(65)}`, /"from" must be 1 to 64 characters/],
    ['?from=', /"from" must be 1 to 64 characters/],
    ['?from=2026-11-08&to=2026-11-01', /"from" and "to": "from" .* must be before "to"/],
    ['?from=2024-01-01&to=2026-01-01', /"from" and "to": .* more than 400 days/],
    ['?groupBy=proxy', /"groupBy" must be one of pool, provider, domain, location, machineType, got "proxy"/],
    ['?groupBy=Pool', /"groupBy"/],
    ['?groupBy=pool&groupBy=domain', /"groupBy" may be given once, got 2/],
    ['?from=2026-11-01&from=2026-11-02', /"from" may be given once/],
    ['?to=2026-11-01&to=2026-11-02&to=x', /"to" may be given once, got 3/],
    ['?from=%00', /"from"/],
  ])('%s → 400 naming the parameter', async (query, message) => {
    const res = await get(query);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; message: string };
    expect(body.error).toBe('ERR_BAD_REQUEST');
    expect(body.message).toMatch(message);
  });

  test('needs a token like every route', async () => {
    expect((await app.request('http://127.0.0.1/v1/usage')).status).toBe(401);
  });
});
