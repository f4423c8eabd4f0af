import { describe, expect, test } from 'vitest';
import type { Pool } from '../../src/model/pool-resource.ts';
import { planPool, plansChanges, SAFETY_LOOK_MS } from '../../src/pools/plan-pool.ts';
import { nextPoolStatus } from '../../src/pools/pool-status.ts';
import { counter, member, MIN, NOW, pool, spread, st, summary, type MemberRow, type PlanSummary } from './plan-fixtures.ts';

/**
 * The pool reconcile's decisions, one pass each, from what it read (pure: no store). Members are
 * `web-<name>`, written `'name [age]m [@provider[/placement]] [Phase] [deleting]'`; new members
 * `web-n1`, `web-n2`… Members are Ready, 5 minutes old and on `local` unless a row says otherwise; a
 * member Failed for 2 minutes is due for replacement.
 */
interface Row {
  what: string;
  pool: Pool;
  members?: (MemberRow | string)[];
  /** Replacement requests (ban feedback, `egress rotate pool`): member → reason. */
  requests?: Record<string, string>;
  /** Names of other Proxies in use. */
  taken?: string[];
  expect: Partial<PlanSummary>;
}

const BAN = 'blocked on 3 domains within 10m';
const NO_PROVIDER = 'invalid spec, no members made: spec.template.spec.provider: required when spec.spread is not given';
const quiet = { changes: false } as const;

const rows: Row[] = [
  // Scale.
  {
    what: 'a new pool: every member made, each for scale',
    pool: pool({ replicas: 3 }),
    expect: { creates: ['web-n1@local scale', 'web-n2@local scale', 'web-n3@local scale'], status: st(3, 3, 0, 0, 0, 'False Scaling'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'steady: nothing to do, Ready True, no look planned',
    pool: pool({ replicas: 3 }),
    members: ['a', 'b', 'c'],
    expect: { ...quiet, status: st(3, 3, 3, 0, 0, 'True EnoughReady') },
  },
  {
    what: 'scale up from 3 Ready to 5',
    pool: pool({ replicas: 5 }),
    members: ['a', 'b', 'c'],
    expect: { creates: ['web-n1@local scale', 'web-n2@local scale'], status: st(5, 5, 3, 0, 0, 'False Scaling'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'scale down: the Failed first, then the not Ready, then the oldest Ready (a Failed member deleted keeps the look it asked for)',
    pool: pool({ replicas: 2 }),
    members: ['a 50m', 'b 40m', { name: 'c', ageMin: 1, failedMin: 0.5 }, 'd 2m Provisioning', 'e 10m'],
    expect: { deletes: ['web-c scale', 'web-d scale', 'web-a scale'], status: st(2, 2, 2, 0, 0, 'True EnoughReady'), look: 1.5 * MIN },
  },
  {
    what: 'scale down between members of the same age: by name',
    pool: pool({ replicas: 1 }),
    members: ['b', 'a'],
    expect: { deletes: ['web-a scale'], status: st(1, 1, 1, 0, 0, 'True EnoughReady') },
  },
  {
    what: 'scale to zero',
    pool: pool({ replicas: 0 }),
    members: ['a', 'b Provisioning'],
    expect: { deletes: ['web-b scale', 'web-a scale'], status: st(0, 0, 0, 0, 0, 'True EnoughReady') },
  },
  {
    what: 'members being deleted are not counted',
    pool: pool({ replicas: 2 }),
    members: ['a', 'b deleting'],
    expect: { creates: ['web-n1@local scale'], status: st(2, 2, 1, 0, 0, 'False Scaling'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'a name another Proxy holds is not taken',
    pool: pool({ replicas: 1 }),
    taken: ['web-n1'],
    expect: { creates: ['web-n2@local scale'], status: st(1, 1, 0, 0, 0, 'False Scaling'), look: SAFETY_LOOK_MS },
  },
  // maxAge rotation, surge-first.
  {
    what: 'maxAge, all old and Ready: one surge member first, none deleted yet',
    pool: pool({ replicas: 3, maxAge: '1h' }),
    members: ['a 70m', 'b 65m', 'c 61m'],
    expect: { creates: ['web-n1@local rotation'], status: st(3, 4, 3, 4, 0, 'True EnoughReady'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'maxAge: with its replacement Ready, the oldest leaves and the next replacement is made',
    pool: pool({ replicas: 3, maxAge: '1h' }),
    members: ['a 70m', 'b 65m', 'c 61m', 'd 1m'],
    expect: { deletes: ['web-a rotation'], creates: ['web-n1@local rotation'], status: st(3, 4, 3, 3, 0, 'True EnoughReady'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'maxAge: waiting for a replacement that is not Ready yet, nothing more is done',
    pool: pool({ replicas: 3, maxAge: '1h' }),
    members: ['a 70m', 'b 65m', 'c 61m', 'd 1m Provisioning'],
    expect: { ...quiet, status: st(3, 4, 3, 4, 0, 'True EnoughReady'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'maxSurge 2: two surge members at once',
    pool: pool({ replicas: 3, maxAge: '1h', maxSurge: 2 }),
    members: ['a 70m', 'b 65m', 'c 61m'],
    expect: { creates: ['web-n1@local rotation', 'web-n2@local rotation'], status: st(3, 5, 3, 5, 0, 'True EnoughReady'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'maxAge: an old member that is not Ready goes at once, without waiting for its replacement',
    pool: pool({ replicas: 2, maxAge: '1h' }),
    members: ['a 70m', 'b 65m Provisioning'],
    expect: {
      deletes: ['web-b rotation'],
      creates: ['web-n1@local rotation', 'web-n2@local rotation'],
      status: st(2, 3, 1, 2, 0, 'False Rotating'),
      look: SAFETY_LOOK_MS,
    },
  },
  {
    what: 'maxAge: the next look is when the first member reaches it',
    pool: pool({ replicas: 2, maxAge: '1h' }),
    members: ['a 10m', 'b 45m'],
    expect: { ...quiet, status: st(2, 2, 2, 0, 0, 'True EnoughReady'), look: 15 * MIN },
  },
  // Failed members.
  {
    what: 'a member Failed for less than failedReplaceAfterMs stays; the next look is when it is due',
    pool: pool({ replicas: 2 }),
    members: ['a', { name: 'b', failedMin: 1.75 }],
    expect: { ...quiet, status: st(2, 2, 1, 0, 1, 'False MembersFailed'), look: 0.25 * MIN },
  },
  {
    what: 'a member Failed for failedReplaceAfterMs is deleted at once and replaced, with its error',
    pool: pool({ replicas: 2 }),
    members: ['a', { name: 'b', failedMin: 2, lastError: 'quota exceeded' }],
    expect: {
      deletes: ['web-b failed (quota exceeded)'],
      creates: ['web-n1@local failed (quota exceeded)'],
      status: st(2, 2, 1, 0, 0, 'False Scaling'),
      look: SAFETY_LOOK_MS,
    },
  },
  // Replacement requests (ban feedback).
  {
    what: 'a replacement asked for a Ready member: its surge member first',
    pool: pool({ replicas: 2 }),
    members: ['a', 'b'],
    requests: { 'web-a': BAN },
    expect: { creates: [`web-n1@local replacement (${BAN})`], status: st(2, 3, 2, 2, 0, 'True EnoughReady'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'a replacement asked for: once the new member is Ready, the member asked for goes',
    pool: pool({ replicas: 2 }),
    members: ['a 9m', 'b 8m', 'n1 1m'],
    requests: { 'web-a': BAN },
    expect: { deletes: [`web-a replacement (${BAN})`], status: st(2, 2, 2, 0, 0, 'True EnoughReady') },
  },
  {
    what: 'requests about members that are gone are cleared',
    pool: pool({ replicas: 1 }),
    members: ['a'],
    requests: { 'web-x': BAN },
    expect: { clear: ['web-x'], status: st(1, 1, 1, 0, 0, 'True EnoughReady') },
  },
  // Spread and template.
  {
    what: 'spread 1:3 of 4 from nothing: each place its share, the largest deficit first',
    pool: pool({ replicas: 4, ...spread(1, 3) }),
    expect: {
      creates: ['web-n1@kvm/home scale', 'web-n2@kvm/home scale', 'web-n3@kvm/home scale', 'web-n4@gcp scale'],
      status: st(4, 4, 0, 0, 0, 'False Scaling'),
      look: SAFETY_LOOK_MS,
    },
  },
  {
    what: 'spread: the place short of its share gets the new member',
    pool: pool({ replicas: 4, ...spread(1, 1) }),
    members: ['a @gcp', 'b @gcp', 'c @kvm/home'],
    expect: { creates: ['web-n1@kvm/home scale'], status: st(4, 4, 3, 0, 0, 'False Scaling'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'spread: a place above its share loses its oldest at once, the place below gains one',
    pool: pool({ replicas: 2, ...spread(1, 1) }),
    members: ['a 20m @gcp', 'b 10m @gcp'],
    expect: { deletes: ['web-a scale'], creates: ['web-n1@kvm/home scale'], status: st(2, 2, 1, 0, 0, 'False Scaling'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'the template moved to another provider: members elsewhere are replaced surge-first',
    pool: pool({ replicas: 2, template: { spec: { provider: 'gcp' } } }),
    members: ['a', 'b'],
    expect: { creates: ['web-n1@gcp spread'], status: st(2, 3, 2, 3, 0, 'True EnoughReady'), look: SAFETY_LOOK_MS },
  },
  {
    what: 'a spread entry dropped: a member there that is not Ready goes at once',
    pool: pool({ replicas: 2, spread: [{ provider: 'gcp', weight: 1 }], template: { spec: {} } }),
    members: ['a @gcp', 'b @gcp', 'c @kvm/home Provisioning'],
    expect: { deletes: ['web-c spread'], status: st(2, 2, 2, 0, 0, 'True EnoughReady') },
  },
  {
    what: 'template labels changed: members relabelled in place, none replaced',
    pool: pool({ replicas: 2, template: { metadata: { labels: { team: 'crawl' } }, spec: { provider: 'local' } } }),
    members: ['a', { name: 'b', labels: { 'egress-proxies.io/pool': 'web', team: 'crawl' } }],
    expect: { relabels: ['web-a'], status: st(2, 2, 2, 0, 0, 'True EnoughReady') },
  },
  // Deleting and invalid pools.
  {
    what: 'a pool being deleted: its live members deleted, those already going waited for',
    pool: pool({ replicas: 2 }, { deleting: true }),
    members: ['a', 'b deleting'],
    requests: { 'web-x': BAN },
    expect: { kind: 'deleting', clear: ['web-x'], deletes: ['web-a pool-deleted'], remaining: 2, status: st(0, 0, 0, 0, 0, 'False Terminating') },
  },
  {
    what: 'a pool being deleted whose members are gone: removed, its requests cleared',
    pool: pool({ replicas: 2 }, { deleting: true }),
    requests: { 'web-x': BAN },
    expect: { kind: 'remove', clear: ['web-x'] },
  },
  {
    what: 'a spec the store could not read: no member touched, the status says why',
    pool: pool({ replicas: 0 }, { specProblems: ['spec.replicas: expected a number, got "three"'] }),
    members: ['a'],
    expect: {
      kind: 'invalid',
      ...quiet,
      message: 'invalid spec, no members made: spec.replicas: expected a number, got "three"',
      status: { ...st(0, 0, 0, 0, 0, 'False InvalidSpec'), lastError: 'invalid spec, no members made: spec.replicas: expected a number, got "three"' },
    },
  },
  {
    what: 'a spec written around the API (no provider, no spread): no member made',
    pool: pool({ replicas: 2, maxSurge: 1, template: { metadata: { labels: {} }, spec: {} } }, { raw: true }),
    expect: { kind: 'invalid', ...quiet, message: NO_PROVIDER, status: { ...st(2, 0, 0, 0, 0, 'False InvalidSpec'), lastError: NO_PROVIDER } },
  },
];

describe('planPool: one pass of the pool reconcile, decided', () => {
  test.each(rows)('$what', (row) => {
    const members = (row.members ?? []).map(member);
    const requests = new Map(Object.entries(row.requests ?? {}).map(([m, reason]) => [m, { reason, requestedAt: NOW.toISOString() }]));
    const taken = new Set([...members.map((m) => m.name), ...(row.taken ?? [])]);
    const plan = planPool({ pool: row.pool, members, requests, now: NOW, failedReplaceAfterMs: 2 * MIN, taken, suffix: counter() });
    const expected = { kind: 'reconcile', clear: [], deletes: [], creates: [], relabels: [], look: 'none', changes: true, ...row.expect };
    expect(summary(row.pool, plan, plansChanges(plan))).toEqual(expected);
  });
});

describe('nextPoolStatus: the Ready condition', () => {
  test('its transition time moves only when it flips; a valid spec again drops the error', () => {
    const p = pool({ replicas: 1 });
    const later = new Date(NOW.getTime() + MIN);
    const notReady = nextPoolStatus(p, { counts: { current: 1, ready: 0, rotating: 0, failed: 0 } }, NOW);
    const invalid = nextPoolStatus({ ...p, status: notReady }, { invalid: 'invalid spec' }, later);
    expect(invalid.conditions).toEqual([
      { type: 'Ready', status: 'False', reason: 'InvalidSpec', message: 'invalid spec', lastTransitionTime: NOW.toISOString() },
    ]);
    const ready = nextPoolStatus({ ...p, status: invalid }, { counts: { current: 1, ready: 1, rotating: 0, failed: 0 } }, later);
    expect(ready).toMatchObject({
      desired: 1,
      ready: 1,
      conditions: [{ status: 'True', reason: 'EnoughReady', message: '1 of 1 members ready', lastTransitionTime: later.toISOString() }],
    });
    expect(ready.lastError).toBeUndefined();
  });
});
