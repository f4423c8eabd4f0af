/** `egress usage` against a real API (`runRoles`, the api role) whose Redis holds a fleet's usage. */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import { priceTableSchema } from '../../src/usage/prices.ts';
import { RedisUsageStore } from '../../src/usage/redis-usage-store.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';

describe('egress usage', () => {
  let roles: RunningRoles;
  let redis: Redis;
  let api: string;
  const cli = (...args: string[]) => runCli(['usage', ...args, '--api-url', api]);
  const today = new Date().toISOString().slice(0, 10);

  beforeAll(async () => {
    const config = { ...testConfig(), prices: priceTableSchema.parse({ currency: 'EUR', egressGB: { local: 0.5 } }) };
    roles = await runRoles(config, ['api'], silentLogger());
    api = roles.api?.url ?? '';
    redis = new Redis(inject('redisUrl'));
    const usage = new RedisUsageStore(redis, config.redis.prefix);
    const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000).toISOString();
    await usage.addTraffic([
      { hour, proxy: 'a-1', pool: 'alpha', provider: 'local', domain: 'example.com', counts: { bytesUp: 1e9, bytesDown: 3e9, requests: 12, tunnels: 3 } },
      { hour, proxy: 'b-1', pool: 'beta', provider: 'local', domain: 'example.org', counts: { bytesUp: 0, bytesDown: 1500, requests: 1, tunnels: 0 } },
    ]);
  });
  afterAll(async () => {
    await roles.close();
    await redis.quit();
  });

  test('a table by pool over the last 7 days, with a total line', async () => {
    const run = await cli();
    expect(run.err).toBe('');
    expect(run.code).toBe(0);
    const lines = run.out.trimEnd().split('\n');
    expect(lines[1]?.split(/\s{3,}/)).toEqual(['DAY', 'POOL', 'UP', 'DOWN', 'REQUESTS', 'TUNNELS', 'INSTANCE-HOURS', 'INSTANCES', 'COST']);
    expect(lines.slice(2).map((l) => l.split(/\s{3,}/))).toEqual([
      [today, 'alpha', '1.00 GB', '3.00 GB', '12', '3', '0.0', '0', '2.00 EUR'],
      [today, 'beta', '0 B', '1.50 kB', '1', '0', '0.0', '0', '0.00 EUR'],
      ['TOTAL', '1.00 GB', '3.00 GB', '13', '3', '0.0', '0', '2.00 EUR'],
    ]);
  });

  test('by domain as JSON, for a window of dates', async () => {
    const run = await cli('--group-by', 'domain', '--from', today, '--to', today, '-o', 'json');
    expect(run.code).toBe(0);
    const report = JSON.parse(run.out) as { groupBy: string; currency: string; rows: { key: string; requests: number }[] };
    expect(report).toMatchObject({ groupBy: 'domain', currency: 'EUR' });
    expect(report.rows.map((r) => [r.key, r.requests])).toEqual([
      ['example.com', 12],
      ['example.org', 1],
    ]);
  });

  test('bad flags exit 2 naming the flag before the API is asked; a window the API refuses exits 1 with its message', async () => {
    expect(await cli('--group-by', 'proxy')).toEqual({
      code: 2,
      out: '',
      err: 'error: --group-by: expected one of pool, provider, domain, location, machineType, got "proxy"\n',
    });
    expect(await cli('--from', 'last week')).toEqual({
      code: 2,
      out: '',
      err: 'error: --from: expected an RFC 3339 time (2026-11-01T10:00:00Z) or a date (2026-11-01), got "last week"\n',
    });
    expect((await cli('-o', 'wide')).code).toBe(2);
    const refused = await cli('--from', '2020-01-01', '--to', '2026-01-01');
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/more than 400 days.*ERR_BAD_REQUEST/);
  });
});
