import { describe, expect, test } from 'vitest';
import type { AutoscaleStatus, PoolAutoscale } from '../../src/model/pool-resource.ts';
import { poolDocumentSchema } from '../../src/model/pool-resource.ts';
import { decideReplicas, type DemandReading } from '../../src/pools/autoscale.ts';
import { budgetWindow, judgeBudget } from '../../src/pools/budget.ts';
import { planPool, SAFETY_LOOK_MS } from '../../src/pools/plan-pool.ts';
import { issueLines } from '../../src/schema/zod-helpers.ts';
import { counter, member, MIN, NOW, pool, st, summary, type MemberRow, type PlanSummary } from './plan-fixtures.ts';

/*
 * Budgets and the autoscaler, decided (pure): the plan's count and growth cap, the autoscaler's
 * count from its pick counter, the budget's judgement within its window, and the schema's words.
 */

interface PlanRow {
  what: string;
  spec: Record<string, unknown>;
  members?: (MemberRow | string)[];
  replicas?: number;
  growthCap?: number;
  expect: Partial<PlanSummary>;
}

const AUTOSCALE = { minReplicas: 0, maxReplicas: 4, picksPerMember: 6, idleAfter: '30s' };

const planRows: PlanRow[] = [
  {
    what: 'budget spent: a pool of 2 asked for 5 grows no more',
    spec: { replicas: 5 },
    members: ['a', 'b'],
    growthCap: 2,
    expect: { creates: [], deletes: [], status: st(5, 2, 2, 0, 0, 'False Scaling') },
  },
  {
    what: 'budget spent: a Failed member is still replaced (the pool does not grow)',
    spec: { replicas: 2 },
    members: ['a', { name: 'b', failedMin: 3 }],
    growthCap: 2,
    expect: { deletes: ['web-b failed'], creates: ['web-n1@local failed'], status: st(2, 2, 1, 0, 0, 'False Scaling'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'budget spent: a Ready member past maxAge waits (its surge would grow the pool); nothing is deleted',
    spec: { replicas: 2, maxAge: '1h' },
    members: ['a 90m', 'b'],
    growthCap: 2,
    expect: { deletes: [], creates: [], status: st(2, 2, 2, 1, 0, 'True EnoughReady'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'budget not spent: the same member is replaced surge-first',
    spec: { replicas: 2, maxAge: '1h' },
    members: ['a 90m', 'b'],
    expect: { deletes: [], creates: ['web-n1@local rotation'] },
  },
  {
    what: 'autoscaled up: the count is the autoscaler’s, not spec.replicas',
    spec: { replicas: 1, autoscale: AUTOSCALE },
    members: ['a'],
    replicas: 3,
    expect: { creates: ['web-n1@local scale', 'web-n2@local scale'], status: st(3, 3, 1, 0, 0, 'False Scaling') },
  },
  {
    what: 'autoscaled to 0: every member goes, the pool is Ready with none',
    spec: { autoscale: AUTOSCALE },
    members: ['a', 'b 10m Provisioning'],
    replicas: 0,
    expect: { deletes: ['web-b scale', 'web-a scale'], creates: [], status: st(0, 0, 0, 0, 0, 'True EnoughReady') },
  },
  {
    what: 'autoscaled, budget spent: the count asks for 4, the cap keeps 1',
    spec: { autoscale: AUTOSCALE },
    members: ['a'],
    replicas: 4,
    growthCap: 1,
    expect: { creates: [] },
  },
];

describe('the plan under a budget and the autoscaler', () => {
  test.each(planRows)('$what', (row) => {
    const target = pool(row.spec);
    const members = (row.members ?? []).map(member);
    const plan = planPool({
      pool: target,
      members,
      requests: new Map(),
      now: NOW,
      failedReplaceAfterMs: 2 * MIN,
      suffix: counter(),
      ...(row.replicas === undefined ? {} : { replicas: row.replicas }),
      ...(row.growthCap === undefined ? {} : { growthCap: row.growthCap }),
    });
    expect(summary(target, plan, true)).toMatchObject(row.expect);
  });
});

const T0 = Date.parse('2026-11-01T12:00:00.000Z');
const SPEC: PoolAutoscale = { minReplicas: 0, maxReplicas: 5, picksPerMember: 60, idleAfter: '2m', scaleDownDelay: '1m' };
const state = (s: Partial<AutoscaleStatus> & { desired: number; atMs: number; lastPickMs?: number }): AutoscaleStatus => ({
  desired: s.desired,
  reason: '',
  rate: s.rate ?? 0,
  picks: s.picks ?? 0,
  readAt: new Date(s.atMs).toISOString(),
  lastPickAt: new Date(s.lastPickMs ?? s.atMs).toISOString(),
  ...(s.lowerSince ? { lowerSince: s.lowerSince } : {}),
});
const read = (picks: number, nowMs: number, lastPickMs?: number): DemandReading => ({ picks, nowMs, ...(lastPickMs === undefined ? {} : { lastPickMs }) });

describe('the autoscaler: rate, delays, idle, budget', () => {
  test('a first pick of an empty pool at minReplicas 0 asks for one member at once (ScaledUp 0→1)', () => {
    const d = decideReplicas({ spec: SPEC, previous: state({ desired: 0, atMs: T0, lastPickMs: T0 - 10 * MIN }), demand: read(1, T0 + 10_000, T0 + 9_000) });
    expect(d.state.desired).toBe(1);
    expect(d.scaled).toMatchObject({ from: 0, to: 1 });
  });

  test('up at once: 600 picks in 10 s smooth to about 542/min, ceil(/60) = 10, capped at maxReplicas 5', () => {
    const d = decideReplicas({ spec: SPEC, previous: state({ desired: 1, atMs: T0 }), demand: read(600, T0 + 10_000, T0 + 10_000) });
    expect(d.state.rate).toBeGreaterThan(500);
    expect(d.state.desired).toBe(5);
    expect(d.scaled).toMatchObject({ from: 1, to: 5 });
  });

  test('the smoothed rate follows picksPerMember: 150/min steady asks for 3', () => {
    const d = decideReplicas({ spec: SPEC, previous: state({ desired: 1, atMs: T0, rate: 150, picks: 100 }), demand: read(125, T0 + 10_000, T0 + 10_000) });
    expect(d.state.rate).toBeCloseTo(150, 5);
    expect(d.state.desired).toBe(3);
  });

  test('down only once the lower count has held for scaleDownDelay', () => {
    const first = decideReplicas({ spec: SPEC, previous: state({ desired: 4, atMs: T0, rate: 60, picks: 10 }), demand: read(10, T0 + 10_000, T0 + 5_000) });
    expect(first.state.desired).toBe(4);
    expect(first.scaled).toBeUndefined();
    expect(first.state.lowerSince).toBe(new Date(T0 + 10_000).toISOString());
    const held = decideReplicas({ spec: SPEC, previous: first.state, demand: read(11, T0 + 50_000, T0 + 45_000) });
    expect(held.state.desired).toBe(4);
    const after = decideReplicas({ spec: SPEC, previous: held.state, demand: read(12, T0 + 70_000, T0 + 65_000) });
    expect(after.state.desired).toBe(1);
    expect(after.scaled).toMatchObject({ from: 4, to: 1 });
    expect(after.state.lowerSince).toBeUndefined();
  });

  test('a lower count that does not hold starts the delay again', () => {
    const lower = decideReplicas({ spec: SPEC, previous: state({ desired: 2, atMs: T0, rate: 60, picks: 0 }), demand: read(0, T0 + 10_000, T0 + 10_000) });
    expect(lower.state.lowerSince).toBeDefined();
    const back = decideReplicas({ spec: SPEC, previous: lower.state, demand: read(60, T0 + 20_000, T0 + 20_000) });
    expect(back.state.desired).toBeGreaterThanOrEqual(2);
    expect(back.state.lowerSince).toBeUndefined();
  });

  test('no pick for idleAfter: minReplicas (0) at once, without waiting for scaleDownDelay', () => {
    const d = decideReplicas({
      spec: SPEC,
      previous: state({ desired: 3, atMs: T0, rate: 200, picks: 50, lastPickMs: T0 - MIN }),
      demand: read(50, T0 + MIN, T0 - MIN),
    });
    expect(d.state.desired).toBe(0);
    expect(d.scaled).toMatchObject({ from: 3, to: 0 });
    expect(d.state.reason).toContain('no pick for 2m');
  });

  test('a new autoscaled pool starts from spec.replicas; without picks it comes down after scaleDownDelay, never waking by itself', () => {
    const start = decideReplicas({ spec: SPEC, startReplicas: 2, previous: undefined, demand: read(0, T0) });
    expect(start.state.desired).toBe(2);
    expect(start.state.startedAt).toBe(new Date(T0).toISOString());
    const soon = decideReplicas({ spec: SPEC, previous: start.state, demand: read(0, T0 + MIN / 2) });
    expect(soon.state.desired).toBe(2);
    const later = decideReplicas({ spec: SPEC, previous: soon.state, demand: read(0, T0 + MIN) });
    expect(later.state.desired).toBe(0);
    expect(later.scaled).toMatchObject({ from: 2, to: 0 });
    const fresh = decideReplicas({ spec: SPEC, previous: undefined, demand: read(0, T0) });
    expect(fresh.state.desired).toBe(0);
    expect(fresh.scaled).toBeUndefined();
  });

  test('budget spent: the count grows no more than the members there are', () => {
    const d = decideReplicas({ spec: SPEC, previous: state({ desired: 1, atMs: T0 }), demand: read(600, T0 + 10_000, T0 + 10_000), capAt: 2 });
    expect(d.state.desired).toBe(2);
    expect(d.state.reason).toContain('by the budget');
    const empty = decideReplicas({
      spec: SPEC,
      previous: state({ desired: 0, atMs: T0, lastPickMs: T0 - 10 * MIN }),
      demand: read(1, T0 + 1000, T0 + 1000),
      capAt: 0,
    });
    expect(empty.state.desired).toBe(0);
    expect(empty.scaled).toBeUndefined();
  });

  test('a pick counter that began again (its key expired) counts from 0', () => {
    const d = decideReplicas({ spec: SPEC, previous: state({ desired: 1, atMs: T0, rate: 0, picks: 1000 }), demand: read(120, T0 + 60_000, T0 + 60_000) });
    expect(d.state.rate).toBeGreaterThan(60);
    expect(d.state.rate).toBeLessThan(120);
  });
});

describe('the budget within its window', () => {
  test('windows are UTC calendar days and months', () => {
    const at = new Date('2026-12-31T23:59:59.000Z');
    expect(budgetWindow('day', at)).toEqual({ from: new Date('2026-12-31T00:00:00.000Z'), to: new Date('2027-01-01T00:00:00.000Z') });
    expect(budgetWindow('month', at)).toEqual({ from: new Date('2026-12-01T00:00:00.000Z'), to: new Date('2027-01-01T00:00:00.000Z') });
  });

  const budget = { window: 'day' as const, spend: 100, traffic: '1GB', stopPicks: false };
  const now = new Date('2026-11-01T12:00:00.000Z');

  test('at 80 % BudgetNearlySpent once per window; at 100 % BudgetExhausted once; a new window starts again', () => {
    const nearly = judgeBudget(budget, { bytes: 850_000_000, cost: 10 }, now, undefined);
    expect(nearly.emit).toEqual(['nearly-spent']);
    expect(nearly.exhausted).toBe(false);
    expect(nearly.worst).toEqual({ limit: 'traffic', ratio: 0.85 });
    expect(judgeBudget(budget, { bytes: 900_000_000, cost: 10 }, now, nearly.status).emit).toEqual([]);
    const spent = judgeBudget(budget, { bytes: 900_000_000, cost: 100 }, now, nearly.status);
    expect(spent.emit).toEqual(['exhausted']);
    expect(spent.exhausted).toBe(true);
    expect(spent.worst).toEqual({ limit: 'spend', ratio: 1 });
    expect(judgeBudget(budget, { bytes: 900_000_000, cost: 120 }, now, spent.status).emit).toEqual([]);
    const tomorrow = judgeBudget(budget, { bytes: 950_000_000, cost: 0 }, new Date('2026-11-02T00:00:01.000Z'), spent.status);
    expect(tomorrow.emit).toEqual(['nearly-spent']);
    expect(tomorrow.status.exhaustedIn).toBeUndefined();
  });

  test('without usage data the budget blocks nothing', () => {
    const j = judgeBudget(budget, undefined, now, undefined);
    expect(j).toMatchObject({ exhausted: false, emit: [], status: { noUsageData: true } });
  });
});

describe('the schema names the field', () => {
  const doc = (spec: Record<string, unknown>): string[] => {
    const r = poolDocumentSchema.safeParse({ kind: 'ProxyPool', metadata: { name: 'web' }, spec: { template: { spec: { provider: 'local' } }, ...spec } });
    return r.success ? [] : issueLines(r.error);
  };

  test.each([
    [{}, 'spec.replicas: required when spec.autoscale is not given'],
    [{ replicas: 1, budget: { window: 'day' } }, 'spec.budget: needs a limit: spend, traffic or both'],
    [{ replicas: 1, budget: { window: 'week', spend: 1 } }, 'spec.budget.window'],
    [{ replicas: 1, budget: { window: 'day', traffic: '5 parsecs' } }, 'spec.budget.traffic: expected bytes above 0'],
    [{ replicas: 1, budget: { window: 'day', spend: -3 } }, 'spec.budget.spend'],
    [
      { autoscale: { minReplicas: 3, maxReplicas: 2, picksPerMember: 1, idleAfter: '1m' } },
      'spec.autoscale.maxReplicas: must be at least minReplicas (3), got 2',
    ],
    [{ autoscale: { minReplicas: 0, maxReplicas: 5001, picksPerMember: 1, idleAfter: '1m' } }, 'spec.autoscale.maxReplicas'],
    [{ autoscale: { minReplicas: 0, maxReplicas: 2, picksPerMember: 0, idleAfter: '1m' } }, 'spec.autoscale.picksPerMember'],
    [{ autoscale: { minReplicas: 0, maxReplicas: 2, picksPerMember: 1, idleAfter: 'soon' } }, 'spec.autoscale.idleAfter: expected a duration of at least 1s'],
    [{ autoscale: { minReplicas: 0, maxReplicas: 2, picksPerMember: 1, idleAfter: '1m', scaleDownDelay: '-1s' } }, 'spec.autoscale.scaleDownDelay'],
  ])('%j → %s', (spec, words) => {
    expect(doc(spec).join('\n')).toContain(words);
  });

  test('a valid autoscaled pool with a budget: no replicas needed; traffic as a quantity or a number', () => {
    expect(doc({ autoscale: { minReplicas: 0, maxReplicas: 2, picksPerMember: 1, idleAfter: '10s' }, budget: { window: 'month', traffic: '2TiB' } })).toEqual(
      [],
    );
    expect(doc({ replicas: 1, budget: { window: 'day', traffic: 500_000_000_000, spend: 20, stopPicks: true } })).toEqual([]);
    const parsed = poolDocumentSchema.parse({
      kind: 'ProxyPool',
      metadata: { name: 'w' },
      spec: { replicas: 1, template: { spec: { provider: 'x' } }, budget: { window: 'day', spend: 1 } },
    });
    expect(parsed.spec.budget?.stopPicks).toBe(false);
  });
});
