import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { EgressEvent } from '../../src/events/event-sink.ts';
import { silentLogger } from '../../src/logging.ts';
import { POOL_LABEL, type Pool } from '../../src/model/pool-resource.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { PickKeys } from '../../src/pools/pick-keys.ts';
import type { PoolUsage, PoolUsageReader } from '../../src/usage/usage-types.ts';
import { waitFor } from '../support/wait.ts';
import { pickConfig } from './pick-support.ts';

/** The pools' usage as the test sets it (the usage store's port, in memory). */
class FakePoolUsage implements PoolUsageReader {
  readonly usage = new Map<string, PoolUsage>();
  poolUsage(pool: string, _from: Date, _to: Date, signal?: AbortSignal): Promise<PoolUsage> {
    signal?.throwIfAborted();
    return Promise.resolve(this.usage.get(pool) ?? { bytes: 0, cost: 0 });
  }
}

const MAX = 3;

/**
 * The issue's test: an autoscaled pool on the local provider (real proxy processes, real readiness
 * probes) follows a pick load driven through the API: the first pick of the empty pool wakes it,
 * members grow to maxReplicas, and after idleAfter without picks the pool goes back to 0. With its
 * traffic budget spent (through the usage port), picks find it empty and it does not grow.
 */
describe('an autoscaled ProxyPool with a budget, under a pick load', () => {
  const usage = new FakePoolUsage();
  let roles: RunningRoles;
  let api: string;
  const json = async <T>(path: string): Promise<T> => (await fetch(`${api}${path}`)).json() as Promise<T>;
  const status = async (): Promise<Pool['status']> => (await json<Pool>('/v1/pools/auto')).status;
  const members = async (): Promise<ProxyView[]> =>
    (await json<{ items: ProxyView[] }>(`/v1/proxies?label=${encodeURIComponent(`${POOL_LABEL}=auto`)}`)).items.filter((p) => !p.metadata.deletionRequestedAt);
  const events = async (reason: string): Promise<EgressEvent[]> =>
    (await json<{ items: EgressEvent[] }>(`/v1/events?kind=ProxyPool&reason=${reason}&limit=100`)).items;

  /** Picks back to back at about 20 a second until stopped; the answers' statuses are counted. */
  function load(): { stop: () => Promise<Map<number, number>>; statuses: Map<number, number> } {
    const statuses = new Map<number, number>();
    let running = true;
    const loop = (async () => {
      while (running) {
        const res = await fetch(`${api}/v1/pools/auto/pick`);
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        await delay(50);
      }
    })();
    return {
      statuses,
      stop: async () => {
        running = false;
        await loop;
        return statuses;
      },
    };
  }

  const config = pickConfig({ queues: ['reconcile'], concurrency: 4, lockDurationMs: 10_000, readiness: { intervalMs: 0 } });

  beforeAll(async () => {
    roles = await runRoles(config, ['worker', 'api'], silentLogger(), { poolUsage: usage });
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    for (const p of (await json<{ items: Pool[] }>('/v1/pools')).items) await fetch(`${api}/v1/pools/${p.name}`, { method: 'DELETE' });
    await waitFor('every pool gone', async () => (await json<{ items: Pool[] }>('/v1/pools')).items.length === 0, 120_000);
    await roles.close();
  });

  test('picks wake it, it grows to maxReplicas, idles to 0; with the budget spent it stays empty', async () => {
    const applied = await fetch(`${api}/v1/pools`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        kind: 'ProxyPool',
        metadata: { name: 'auto' },
        spec: {
          template: { spec: { provider: 'local' } },
          autoscale: { minReplicas: 0, maxReplicas: MAX, picksPerMember: 6, idleAfter: '6s', scaleDownDelay: '2s' },
          budget: { window: 'day', traffic: '1GB' },
        },
      }),
    });
    expect(applied.status, await applied.clone().text()).toBe(200);
    await waitFor('the autoscaler to hold the pool at 0', async () => (await status()).autoscale?.desired === 0, 30_000);
    expect((await status()).conditions.find((c) => c.type === 'Budget')).toMatchObject({ status: 'True', reason: 'WithinBudget' });

    // Up: the first pick of the empty pool answers 503 and wakes it; members follow the pick rate to maxReplicas.
    const first = await fetch(`${api}/v1/pools/auto/pick`);
    expect(first.status).toBe(503);
    expect(first.headers.get('retry-after')).toBe('5');
    expect(await first.json()).toMatchObject({ reason: 'none-ready', waking: true });
    const up = load();
    let most = 0;
    try {
      await waitFor(
        `${MAX} Ready members`,
        async () => {
          const now = await members();
          most = Math.max(most, now.length);
          return now.length === MAX && now.every((m) => m.status.phase === 'Ready');
        },
        180_000,
        200,
      );
      await waitFor('a pick served', () => (up.statuses.get(200) ?? 0) > 0, 30_000);
      const s = await status();
      expect(s.autoscale?.desired).toBe(MAX);
      // The smoothed rate is past (MAX - 1) × picksPerMember: ceil(rate / 6) asks for MAX.
      expect(s.autoscale?.rate).toBeGreaterThan((MAX - 1) * 6);
      const metrics = await (await fetch(`${api}/metrics`)).text();
      expect(metrics).toContain(`proxy_operator_pool_autoscale_replicas{pool="auto",kind="desired"} ${MAX}`);
      expect(metrics).toMatch(/proxy_operator_pool_pick_rate\{pool="auto"\} \d+/);

      // 80 % of the traffic budget: BudgetNearlySpent, once, and the gauge.
      usage.usage.set('auto', { bytes: 850_000_000, cost: 0 });
      const nearly = await waitFor('BudgetNearlySpent', async () => (await events('BudgetNearlySpent')).at(0), 30_000, 200);
      expect(nearly).toMatchObject({ type: 'Warning', object: { name: 'auto' }, details: { limit: 'traffic', ratio: 0.85 } });
      expect(await (await fetch(`${api}/metrics`)).text()).toContain('proxy_operator_pool_budget_used_ratio{pool="auto",limit="traffic"} 0.85');
    } finally {
      await up.stop();
    }
    expect(most).toBeLessThanOrEqual(MAX);
    const scaledUp = await events('ScaledUp');
    expect(scaledUp.length).toBeGreaterThan(0);
    expect(scaledUp.every((e) => Number(e.details?.to) <= MAX && Number(e.details?.to) > Number(e.details?.from))).toBe(true);

    // Idle: no pick for idleAfter, the pool goes to minReplicas (0) and its members go.
    await waitFor('the pool back at 0', async () => (await status()).autoscale?.desired === 0 && (await members()).length === 0, 120_000, 200);
    const down = (await events('ScaledDown')).find((e) => e.details?.to === 0);
    expect(down?.message).toContain('no pick for 6s');
    expect((await events('BudgetNearlySpent')).length).toBe(1);

    // The budget spent: BudgetExhausted once, the Budget condition False; picks find the pool empty and it stays so.
    usage.usage.set('auto', { bytes: 2_000_000_000, cost: 0 });
    await waitFor('BudgetExhausted', async () => (await events('BudgetExhausted')).length === 1, 30_000, 200);
    await waitFor('the Budget condition False', async () => (await status()).conditions.find((c) => c.type === 'Budget')?.status === 'False', 30_000);
    const created = (await events('MemberCreated')).length;
    const again = load();
    let passes = 0;
    try {
      const before = (await status()).autoscale?.readAt;
      let seen = before;
      // Several passes of the autoscaler while picks come: none makes a member.
      await waitFor(
        'three autoscaler passes under the load',
        async () => {
          const s = await status();
          if (s.autoscale?.readAt !== seen) {
            seen = s.autoscale?.readAt;
            passes++;
          }
          expect(s.current).toBe(0);
          return passes >= 3 && (again.statuses.get(503) ?? 0) > 10;
        },
        60_000,
        200,
      );
    } finally {
      await again.stop();
    }
    expect([...again.statuses.keys()]).toEqual([503]);
    const refused = await fetch(`${api}/v1/pools/auto/pick`);
    expect(await refused.json()).toMatchObject({ reason: 'budget-exhausted' });
    expect((await events('MemberCreated')).length).toBe(created);
    expect((await members()).length).toBe(0);
    const s = await status();
    expect(s.autoscale?.reason).toContain('by the budget');
    expect(s.budget?.traffic).toMatchObject({ used: 2_000_000_000, limit: 1_000_000_000, ratio: 2 });

    // Deleted: its pick counter and spent-budget key go with it (a pool made again under the name starts clean).
    const keys = new PickKeys(config.redis.prefix);
    const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    try {
      expect(await redis.exists(keys.demand('auto'), keys.budget('auto'))).toBe(2);
      expect((await fetch(`${api}/v1/pools/auto`, { method: 'DELETE' })).status).toBe(202);
      await waitFor('the pool gone', async () => (await fetch(`${api}/v1/pools/auto`)).status === 404, 60_000, 200);
      expect(await redis.exists(keys.demand('auto'), keys.budget('auto'))).toBe(0);
    } finally {
      await redis.quit();
    }
  });
});
