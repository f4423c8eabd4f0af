import { describe, expect, test } from 'vitest';
import { nextProviderHealth } from '../../src/health/next-status.ts';
import type { TargetResult } from '../../src/health/types.ts';
import type { CheckResultData } from '../../src/health/check-result.ts';

const T0 = '2026-11-01T10:00:00.000Z';
const T1 = '2026-11-01T10:01:00.000Z';
const T2 = '2026-11-01T10:02:00.000Z';
const NOW = new Date('2026-11-01T11:00:00.000Z');

function target(name: string, ready: boolean, message = ready ? 'fine' : 'broken'): TargetResult {
  return { target: name, ready, reason: ready ? 'Ok' : 'Unreachable', message, details: { address: name }, durationSeconds: 0.1 };
}

function result(checkedAt: string, targets: TargetResult[], jobId = `job-${checkedAt}`): CheckResultData {
  return { provider: 'kvm', checkJobId: jobId, checkedAt, targets };
}

describe('nextProviderHealth', () => {
  test('a first result creates the object with every time set to the check time', () => {
    const ph = nextProviderHealth(undefined, result(T0, [target('b', true), target('a', true)]), NOW);
    expect(ph).toEqual({
      name: 'kvm',
      status: {
        ready: true,
        lastTransitionTime: T0,
        lastCheckTime: T0,
        targets: [
          { name: 'a', ready: true, reason: 'Ok', message: 'fine', lastTransitionTime: T0, lastCheckTime: T0, durationSeconds: 0.1, details: { address: 'a' } },
          { name: 'b', ready: true, reason: 'Ok', message: 'fine', lastTransitionTime: T0, lastCheckTime: T0, durationSeconds: 0.1, details: { address: 'b' } },
        ],
      },
    });
  });

  test('no flip: transition times stay, check times move', () => {
    const first = nextProviderHealth(undefined, result(T0, [target('a', true), target('b', false)]), NOW);
    const second = nextProviderHealth(first, result(T1, [target('a', true), target('b', false, 'still broken')]), NOW);
    expect(second.status.ready).toBe(false);
    expect(second.status.lastTransitionTime).toBe(T0);
    expect(second.status.lastCheckTime).toBe(T1);
    for (const t of second.status.targets) {
      expect(t.lastTransitionTime).toBe(T0);
      expect(t.lastCheckTime).toBe(T1);
    }
    expect(second.status.targets[1]?.message).toBe('still broken');
  });

  test('a target flips: only its lastTransitionTime moves, and the object’s because overall ready flipped', () => {
    const first = nextProviderHealth(undefined, result(T0, [target('a', true), target('b', false)]), NOW);
    const repaired = nextProviderHealth(first, result(T1, [target('a', true), target('b', true)]), NOW);
    expect(repaired.status.targets.find((t) => t.name === 'a')?.lastTransitionTime).toBe(T0);
    expect(repaired.status.targets.find((t) => t.name === 'b')?.lastTransitionTime).toBe(T1);
    expect(repaired.status.ready).toBe(true);
    expect(repaired.status.lastTransitionTime).toBe(T1);
  });

  test('one target flips but overall ready does not: the object’s lastTransitionTime stays', () => {
    const first = nextProviderHealth(undefined, result(T0, [target('a', false), target('b', false)]), NOW);
    const half = nextProviderHealth(first, result(T1, [target('a', true), target('b', false)]), NOW);
    expect(half.status.ready).toBe(false);
    expect(half.status.lastTransitionTime).toBe(T0);
    expect(half.status.targets.find((t) => t.name === 'a')?.lastTransitionTime).toBe(T1);
  });

  test('message is truncated to 1024 characters', () => {
    const ph = nextProviderHealth(undefined, result(T0, [target('a', false, 'x'.repeat(2000))]), NOW);
    expect(ph.status.targets[0]?.message).toHaveLength(1024);
    const emoji = nextProviderHealth(undefined, result(T0, [target('a', false, '😀'.repeat(1500))]), NOW);
    expect(Array.from(emoji.status.targets[0]?.message ?? '')).toHaveLength(1024);
  });

  test('redelivery of the same result changes nothing', () => {
    const r1 = result(T0, [target('a', true)]);
    const r2 = result(T1, [target('a', false)]);
    const once = nextProviderHealth(nextProviderHealth(undefined, r1, NOW), r2, NOW);
    const twice = nextProviderHealth(once, r2, new Date(NOW.getTime() + 3_600_000));
    expect(twice).toEqual(once);
  });

  test('an older result arriving late does not overwrite a newer one', () => {
    const newer = nextProviderHealth(undefined, result(T2, [target('a', false)]), NOW);
    const late = nextProviderHealth(newer, result(T1, [target('a', true)]), NOW);
    expect(late).toEqual(newer);
  });

  test('times from a worker whose clock runs ahead are clamped to now', () => {
    const ph = nextProviderHealth(undefined, result('2030-01-01T00:00:00.000Z', [target('a', true)]), NOW);
    expect(ph.status.lastCheckTime).toBe(NOW.toISOString());
  });

  test('an empty result is not ready', () => {
    expect(nextProviderHealth(undefined, result(T0, []), NOW).status.ready).toBe(false);
  });
});
