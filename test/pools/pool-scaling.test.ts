import { describe, expect, test } from 'vitest';
import type { EventSink, NewEvent } from '../../src/events/event-sink.ts';
import { emptyPoolStatus, poolDocumentSchema, type Pool } from '../../src/model/pool-resource.ts';
import type { DemandReading } from '../../src/pools/autoscale.ts';
import type { PickDemandStore } from '../../src/pools/pick-demand.ts';
import { scalePool } from '../../src/pools/pool-scaling.ts';
import type { PoolUsage, PoolUsageReader } from '../../src/usage/usage-types.ts';

/* What one pass reads and records for budgets and the autoscaler (pool-scaling.ts), with in-memory ports. */

class FakeUsage implements PoolUsageReader {
  usage: PoolUsage | Error = { bytes: 0, cost: 0 };
  readonly asked: { from: string; to: string }[] = [];
  poolUsage(_pool: string, from: Date, to: Date): Promise<PoolUsage> {
    this.asked.push({ from: from.toISOString(), to: to.toISOString() });
    return this.usage instanceof Error ? Promise.reject(this.usage) : Promise.resolve(this.usage);
  }
}

class MemoryDemand implements PickDemandStore {
  reading: DemandReading = { picks: 0, nowMs: 0 };
  spent: { value: string; untilMs: number } | undefined;
  read(): Promise<DemandReading> {
    return Promise.resolve(this.reading);
  }
  markSpent(_pool: string, value: string, untilMs: number): Promise<void> {
    this.spent = { value, untilMs };
    return Promise.resolve();
  }
  clearSpent(): Promise<void> {
    this.spent = undefined;
    return Promise.resolve();
  }
  forget(): Promise<void> {
    return this.clearSpent();
  }
}

class Events implements EventSink {
  readonly recorded: NewEvent[] = [];
  record(event: NewEvent): void {
    this.recorded.push(event);
  }
}

const NOW = new Date('2026-12-07T12:00:00.000Z');
const signal = AbortSignal.timeout(10_000);

function pool(spec: Record<string, unknown>, status = emptyPoolStatus()): Pool {
  const doc = poolDocumentSchema.parse({ kind: 'ProxyPool', metadata: { name: 'web' }, spec: { template: { spec: { provider: 'local' } }, ...spec } });
  return { name: 'web', labels: {}, spec: doc.spec, metadata: { uid: 'u', generation: 1, createdAt: NOW.toISOString() }, status };
}

describe('a pass of budgets and the autoscaler', () => {
  test('spent with stopPicks: growth capped at the members there are, the picks key set until the window turns, each event once', async () => {
    const usage = new FakeUsage();
    usage.usage = { bytes: 1_200_000_000, cost: 3 };
    const demand = new MemoryDemand();
    const events = new Events();
    const p = pool({ replicas: 5, budget: { window: 'day', traffic: '1GB', spend: 10, stopPicks: true } });
    const first = await scalePool(p, 3, NOW, { usage, demand, events }, signal);
    expect(first.growthCap).toBe(3);
    expect(usage.asked).toEqual([{ from: '2026-12-07T00:00:00.000Z', to: '2026-12-08T00:00:00.000Z' }]);
    expect(demand.spent).toEqual({ value: '1 traffic day', untilMs: Date.parse('2026-12-08T00:00:00.000Z') });
    expect(events.recorded.map((e) => e.reason)).toEqual(['BudgetExhausted']);
    expect(events.recorded[0]?.message).toContain('picks answer 429 until 2026-12-08T00:00:00.000Z');
    expect(first.budget).toMatchObject({ traffic: { used: 1_200_000_000, limit: 1_000_000_000, ratio: 1.2 }, spend: { ratio: 0.3 } });
    expect(first.lookAfterMs).toBe(60_000);
    // The next pass of the same window records nothing again.
    await scalePool({ ...p, status: { ...p.status, ...(first.budget ? { budget: first.budget } : {}) } }, 3, NOW, { usage, demand, events }, signal);
    expect(events.recorded).toHaveLength(1);
    // Below the limits again (the usage store corrected): picks go on.
    usage.usage = { bytes: 0, cost: 0 };
    expect((await scalePool(p, 3, NOW, { usage, demand, events }, signal)).growthCap).toBeUndefined();
    expect(demand.spent).toBeUndefined();
  });

  test('no usage reader, or one that fails: no usage data, nothing blocked, nothing recorded', async () => {
    const demand = new MemoryDemand();
    demand.spent = { value: '1 spend day', untilMs: 0 };
    const events = new Events();
    const p = pool({ replicas: 1, budget: { window: 'month', spend: 1 } });
    const none = await scalePool(p, 1, NOW, { demand, events }, signal);
    expect(none).toMatchObject({ budget: { noUsageData: true, from: '2026-12-01T00:00:00.000Z', to: '2027-01-01T00:00:00.000Z' } });
    expect(none.growthCap).toBeUndefined();
    expect(demand.spent).toBeUndefined();
    const failing = new FakeUsage();
    failing.usage = new Error('usage store unreachable');
    expect((await scalePool(p, 1, NOW, { usage: failing, demand, events }, signal)).budget?.noUsageData).toBe(true);
    expect(events.recorded).toEqual([]);
  });

  test('a budget taken off the spec clears the picks key at once', async () => {
    const demand = new MemoryDemand();
    demand.spent = { value: '1 spend day', untilMs: 0 };
    const was = pool({ replicas: 1, budget: { window: 'day', spend: 1 } });
    await scalePool(
      pool({ replicas: 1 }, { ...emptyPoolStatus(), budget: { window: 'day', from: NOW.toISOString(), to: NOW.toISOString() } }),
      1,
      NOW,
      { demand },
      signal,
    );
    expect(demand.spent).toBeUndefined();
    expect(was.spec.budget).toBeDefined();
  });

  test('autoscaled: the count from the pick counter, ScaledUp with from and to, a look within seconds', async () => {
    const demand = new MemoryDemand();
    const events = new Events();
    const t = NOW.getTime();
    demand.reading = { picks: 0, nowMs: t };
    const spec = { autoscale: { minReplicas: 0, maxReplicas: 4, picksPerMember: 10, idleAfter: '1m', scaleDownDelay: '30s' } };
    const start = await scalePool(pool(spec), 0, NOW, { demand, events }, signal);
    expect(start).toMatchObject({ replicas: 0, lookAfterMs: 10_000 });
    demand.reading = { picks: 10, nowMs: t + 10_000, lastPickMs: t + 9_000 };
    const up = await scalePool(
      pool(spec, { ...emptyPoolStatus(), ...(start.autoscale ? { autoscale: start.autoscale } : {}) }),
      0,
      NOW,
      { demand, events },
      signal,
    );
    expect(up.replicas).toBe(1);
    expect(events.recorded).toMatchObject([{ reason: 'ScaledUp', details: { from: 0, to: 1 } }]);
    expect(events.recorded[0]?.message).toMatch(/^autoscaled from 0 to 1 members: \d+\.\d picks\/min at 10 per member$/);
  });
});
