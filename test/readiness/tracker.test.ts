import { describe, expect, it } from 'vitest';
import { ReadinessTracker } from '../../src/readiness/tracker.ts';

const T0 = Date.UTC(2026, 0, 1);
const s = (n: number): number => T0 + n * 1000;

describe('ReadinessTracker', () => {
  it('a new proxy is ready after one success and reports the flip once', () => {
    const t = new ReadinessTracker();
    expect(t.record('p', false, s(0))).toMatchObject({ ready: false, consecutiveFailures: 1 });
    expect(t.record('p', false, s(0)).transition).toBeUndefined();
    const first = t.record('p', true, s(10));
    expect(first).toMatchObject({ proxy: 'p', ready: true, transition: 'ready', consecutiveFailures: 0, lastTransitionAt: s(10) });
    expect(t.record('p', true, s(20)).transition).toBeUndefined();
  });

  it('a ready proxy survives fewer than N failures in a row and flips on the Nth (default 3)', () => {
    const t = new ReadinessTracker();
    t.record('p', true, s(0));
    expect(t.record('p', false, s(1))).toMatchObject({ ready: true, consecutiveFailures: 1 });
    expect(t.record('p', false, s(2))).toMatchObject({ ready: true, consecutiveFailures: 2 });
    // A success in between resets the count.
    expect(t.record('p', true, s(3)).transition).toBeUndefined();
    t.record('p', false, s(4));
    t.record('p', false, s(5));
    const flipped = t.record('p', false, s(6));
    expect(flipped).toMatchObject({ ready: false, transition: 'unready', consecutiveFailures: 3, unreadySince: s(6), lastTransitionAt: s(6) });
    expect(t.record('p', false, s(7)).transition).toBeUndefined();
    expect(t.record('p', true, s(8))).toMatchObject({ ready: true, transition: 'ready' });
    expect(t.get('p')?.unreadySince).toBeUndefined();
  });

  it('honours a configured threshold and rejects a nonsensical one', () => {
    const t = new ReadinessTracker({ failureThreshold: 1 });
    t.record('p', true, s(0));
    expect(t.record('p', false, s(1)).transition).toBe('unready');
    expect(() => new ReadinessTracker({ failureThreshold: 0 })).toThrow(RangeError);
  });

  it('reports how long a proxy has been unready and which are due for replacement', () => {
    const t = new ReadinessTracker({ failureThreshold: 2 });
    t.record('a', true, s(0));
    t.record('a', false, s(10));
    t.record('a', false, s(20)); // unready since 20
    t.record('b', true, s(0));
    t.record('c', false, s(5)); // never ready: unready since its first observation
    expect(t.unreadyForMs('a', s(80))).toBe(60_000);
    expect(t.unreadyForMs('b', s(80))).toBe(0);
    expect(t.unreadyForMs('unknown', s(80))).toBe(0);
    expect(t.dueForReplacement(60_000, s(80)).sort()).toEqual(['a', 'c']);
    expect(t.dueForReplacement(70_000, s(80))).toEqual(['c']);
    expect(t.counts()).toEqual({ ready: 1, unready: 2 });
    t.forget('c');
    expect(t.get('c')).toBeUndefined();
    expect(t.counts()).toEqual({ ready: 1, unready: 1 });
  });

  it('keeps proxies independent', () => {
    const t = new ReadinessTracker({ failureThreshold: 2 });
    t.record('a', true, s(0));
    t.record('b', true, s(0));
    t.record('a', false, s(1));
    t.record('b', false, s(1));
    expect(t.record('a', false, s(2)).transition).toBe('unready');
    expect(t.get('b')).toMatchObject({ ready: true, consecutiveFailures: 1 });
  });
});
