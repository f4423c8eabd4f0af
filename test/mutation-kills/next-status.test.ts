/**
 * The publisher's status function in the cases the seed's rules decide and test/publisher/next-status.test.ts
 * leaves open: a reason change without a ready flip, a target the result does not mention, a result
 * naming a target twice, the order of targets, and the object's lastCheckTime against late results.
 * Written for the mutation run (docs/testing.md#mutation-testing).
 */
import { describe, expect, test } from 'vitest';
import { nextProviderHealth } from '../../src/health/next-status.ts';
import type { Reason } from '../../src/health/reasons.ts';
import type { TargetResult } from '../../src/health/types.ts';
import type { CheckResultData } from '../../src/health/check-result.ts';

const T0 = '2026-11-01T10:00:00.000Z';
const T1 = '2026-11-01T10:01:00.000Z';
const T2 = '2026-11-01T10:02:00.000Z';
const NOW = new Date('2026-11-01T11:00:00.000Z');

function target(name: string, ready: boolean, reason: Reason = ready ? 'Ok' : 'Unreachable', message: string = reason): TargetResult {
  return { target: name, ready, reason, message, details: { address: name }, durationSeconds: 0.25 };
}

function result(checkedAt: string, targets: TargetResult[]): CheckResultData {
  return { provider: 'kvm', checkJobId: `job-${checkedAt}`, checkedAt, targets };
}

describe('nextProviderHealth: the only-on-flip rule and its edges', () => {
  test('a reason change without a ready flip keeps the target’s lastTransitionTime (and the object’s)', () => {
    const first = nextProviderHealth(undefined, result(T0, [target('a', false, 'Unreachable')]), NOW);
    const second = nextProviderHealth(first, result(T1, [target('a', false, 'Timeout', 'no answer')]), NOW);
    expect(second.status.targets).toEqual([
      {
        name: 'a',
        ready: false,
        reason: 'Timeout',
        message: 'no answer',
        lastTransitionTime: T0,
        lastCheckTime: T1,
        durationSeconds: 0.25,
        details: { address: 'a' },
      },
    ]);
    expect(second.status).toMatchObject({ ready: false, lastTransitionTime: T0, lastCheckTime: T1 });
  });

  test('a ready target whose reason stays Ok keeps its time; one that becomes not ready moves it', () => {
    const first = nextProviderHealth(undefined, result(T0, [target('a', true), target('b', true)]), NOW);
    const second = nextProviderHealth(first, result(T1, [target('a', true), target('b', false, 'PoolInactive')]), NOW);
    expect(second.status.targets.map((t) => [t.name, t.lastTransitionTime, t.reason])).toEqual([
      ['a', T0, 'Ok'],
      ['b', T1, 'PoolInactive'],
    ]);
    expect(second.status).toMatchObject({ ready: false, lastTransitionTime: T1 });
  });

  test('a target the result does not mention is kept as it was; the object is judged over all targets', () => {
    const first = nextProviderHealth(undefined, result(T0, [target('a', true), target('b', false)]), NOW);
    const second = nextProviderHealth(first, result(T1, [target('a', true)]), NOW);
    expect(second.status.targets).toEqual(first.status.targets.map((t) => (t.name === 'a' ? { ...t, lastCheckTime: T1 } : t)));
    expect(second.status.ready).toBe(false);
  });

  test('a target named twice in one result counts once, as first given', () => {
    const ph = nextProviderHealth(undefined, result(T0, [target('a', true), target('a', false)]), NOW);
    expect(ph.status.targets).toHaveLength(1);
    expect(ph.status.targets[0]).toMatchObject({ name: 'a', ready: true });
    expect(ph.status.ready).toBe(true);
  });

  test('targets come sorted by name whatever order the result and the stored object give', () => {
    const first = nextProviderHealth(undefined, result(T0, [target('m', true)]), NOW);
    const ph = nextProviderHealth(first, result(T1, [target('z', true), target('b', true)]), NOW);
    expect(ph.status.targets.map((t) => t.name)).toEqual(['b', 'm', 'z']);
  });

  test('a late result for one target leaves it alone and still updates the others; the object keeps its later check time', () => {
    const first = nextProviderHealth(undefined, result(T2, [target('a', true)]), NOW);
    const late = nextProviderHealth(first, result(T1, [target('a', false), target('b', true)]), NOW);
    expect(late.status.targets).toEqual([
      first.status.targets[0],
      { name: 'b', ready: true, reason: 'Ok', message: 'Ok', lastTransitionTime: T1, lastCheckTime: T1, durationSeconds: 0.25, details: { address: 'b' } },
    ]);
    expect(late.status.lastCheckTime).toBe(T2);
    expect(late.status.ready).toBe(true);
    expect(late.status.lastTransitionTime).toBe(T2);
  });

  test('a result at the same time as the stored one is applied (only older ones are refused)', () => {
    const first = nextProviderHealth(undefined, result(T1, [target('a', true)]), NOW);
    const same = nextProviderHealth(first, result(T1, [target('a', false, 'Error', 'now broken')]), NOW);
    expect(same.status.targets[0]).toMatchObject({ ready: false, reason: 'Error', message: 'now broken', lastTransitionTime: T1 });
  });

  test('a newer result moves the object’s lastCheckTime forward', () => {
    const first = nextProviderHealth(undefined, result(T0, [target('a', true)]), NOW);
    expect(nextProviderHealth(first, result(T2, [target('a', true)]), NOW).status.lastCheckTime).toBe(T2);
  });

  test('details are a copy: changing the result afterwards does not change the status', () => {
    const r = result(T0, [target('a', true)]);
    const ph = nextProviderHealth(undefined, r, NOW);
    (r.targets[0] as TargetResult).details.address = 'changed';
    expect(ph.status.targets[0]?.details).toEqual({ address: 'a' });
  });

  test('a result in the past is kept at its own time, not now', () => {
    expect(nextProviderHealth(undefined, result(T0, [target('a', true)]), NOW).status.lastCheckTime).toBe(T0);
  });
});
