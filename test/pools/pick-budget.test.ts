import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import { silentLogger } from '../../src/logging.ts';
import { spentBudgetValue } from '../../src/pools/pick-budget.ts';
import { RedisPickDemand } from '../../src/pools/pick-demand.ts';
import { PickKeys } from '../../src/pools/pick-keys.ts';
import { uniquePrefix } from '../support/config.ts';
import { pickConfig, PoolFixture } from './pick-support.ts';

const TOKEN = 'pick-budget-token-0123456789';
const AUTOSCALE = { minReplicas: 0, maxReplicas: 3, picksPerMember: 60, idleAfter: '1m' };

/** The pick script's budget and demand paths on a real redis-server, through the API. */
describe('picks: spent budgets (429) and empty autoscaled pools (503, waking)', () => {
  const prefix = uniquePrefix();
  let roles: RunningRoles;
  let api: string;
  let fixture: PoolFixture;
  let demand: RedisPickDemand;
  let reconcile: Queue;

  const pick = (pool: string): Promise<Response> => fetch(`${api}/v1/pools/${pool}/pick`, { headers: { authorization: `Bearer ${TOKEN}` } });

  beforeAll(async () => {
    roles = await runRoles(pickConfig({ prefix, tokens: [TOKEN], queues: ['checks'] }), ['api'], silentLogger());
    api = roles.api?.url ?? '';
    fixture = new PoolFixture(prefix);
    demand = new RedisPickDemand(fixture.redis, new PickKeys(prefix));
    reconcile = new Queue('reconcile', { connection: redisOptions(inject('redisUrl'), 'producer'), prefix });
    await fixture.poolWith('web', { replicas: 1, budget: { window: 'day', traffic: '1GB', stopPicks: true } });
    await fixture.member('web', 'web-aaaaa', 'http://127.0.0.1:4101');
    await fixture.poolWith('auto', { autoscale: AUTOSCALE });
    await fixture.poolWith('dry', { autoscale: AUTOSCALE, budget: { window: 'month', spend: 10, stopPicks: false } });
  });
  afterAll(async () => {
    await reconcile.close();
    await roles.close();
    await fixture.close();
  });

  test('a spent budget with stopPicks: 429, Retry-After until the window turns, the budget named; cleared, picks go on', async () => {
    expect((await pick('web')).status).toBe(200);
    const until = Date.now() + 3_600_000;
    await demand.markSpent('web', spentBudgetValue(true, 'traffic', 'day'), until);
    const refused = await pick('web');
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(3500);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    const body = (await refused.json()) as { error: string; message: string; budget: Record<string, unknown> };
    expect(body.error).toBe('ERR_POOL_BUDGET_EXHAUSTED');
    expect(body.budget).toMatchObject({ limit: 'traffic', window: 'day', retryAfterSeconds: retryAfter });
    expect(body.message).toContain('pool "web" has spent its traffic budget for this day');
    // A non-autoscaled pool's picks are not counted.
    expect((await demand.read('web')).picks).toBe(0);
    await demand.clearSpent('web');
    expect((await pick('web')).status).toBe(200);
  });

  test('a spent budget without stopPicks leaves picks alone', async () => {
    await demand.markSpent('web', spentBudgetValue(false, 'spend', 'day'), Date.now() + 60_000);
    expect((await pick('web')).status).toBe(200);
    await demand.clearSpent('web');
  });

  test('an empty autoscaled pool: 503 waking with Retry-After, the pick counted as demand, the pool asked to reconcile', async () => {
    const res = await pick('auto');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ error: 'ERR_POOL_NO_MEMBER', reason: 'none-ready', waking: true });
    expect(body.message).toContain('one is being started');
    const jobId = await reconcile.getDeduplicationJobId('pool-reconcile-auto');
    const job = jobId ? await reconcile.getJob(jobId) : undefined;
    expect(job).toMatchObject({ name: 'pool-reconcile', data: { pool: 'auto' } });
    expect((await pick('auto')).status).toBe(503);
    const read = await demand.read('auto');
    expect(read.picks).toBe(2);
    expect(read.lastPickMs).toBeGreaterThan(read.nowMs - 60_000);
    expect(read.lastPickMs).toBeLessThanOrEqual(read.nowMs);
  });

  test('an empty pool whose budget is spent: 503 saying the budget keeps it empty, until the window turns', async () => {
    const until = Date.now() + 7_200_000;
    await demand.markSpent('dry', spentBudgetValue(false, 'spend', 'month'), until);
    const res = await pick('dry');
    expect(res.status).toBe(503);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(7100);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ reason: 'budget-exhausted' });
    expect(body.waking).toBeUndefined();
    expect(body.message).toContain('spend budget for this month is spent');
    // Still demand: when the window turns, the autoscaler sees it.
    expect((await demand.read('dry')).picks).toBe(1);
  });
});
