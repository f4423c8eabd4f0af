import { describe, expect, it } from 'vitest';
import { afterFailure, passesNeeded } from '../../src/proxies/eviction.ts';
import type { ReadinessRules } from '../../src/proxies/readiness-contract.ts';
import type { ProxyStatus } from '../../src/model/proxy-resource.ts';

/**
 * The readiness hysteresis as the pure rule reconcile, the probe loop and the exit watch share
 * (src/proxies/eviction.ts): out of discovery after `failureThreshold` failed probes in a row,
 * back after `successThreshold` passes of the same instance.
 */
const T0 = new Date(Date.UTC(2026, 0, 1));
const at = (s: number): Date => new Date(T0.getTime() + s * 1000);
const ready: ProxyStatus = { phase: 'Ready', conditions: [], observedGeneration: 1, instanceId: 'i-1', url: 'http://127.0.0.1:1' };

/** Applies `n` failed probes one second apart, returning every intermediate outcome. */
function failures(start: ProxyStatus, n: number, rules: ReadinessRules): { status: ProxyStatus; evicted: boolean }[] {
  const out: { status: ProxyStatus; evicted: boolean }[] = [];
  let status = start;
  for (let i = 1; i <= n; i++) {
    const next = afterFailure(status, `failure ${i}`, rules, at(i));
    out.push(next);
    status = next.status;
  }
  return out;
}

describe('the eviction rule', () => {
  it('a Ready proxy survives fewer than N failed probes in a row and leaves discovery on the Nth, once', () => {
    const rules = { failureThreshold: 3, successThreshold: 2 };
    const [first, second, third, fourth] = failures(ready, 4, rules);
    expect(first).toMatchObject({ evicted: false, status: { phase: 'Ready', probeFailures: 1, lastError: 'failure 1' } });
    expect(first?.status.unreadySince).toBeUndefined();
    expect(second).toMatchObject({ evicted: false, status: { phase: 'Ready', probeFailures: 2 } });
    expect(third).toMatchObject({ evicted: true, status: { phase: 'Provisioning', probeFailures: 3, unreadySince: at(3).toISOString() } });
    // Already out: counted, not evicted again, and the time it left stays.
    expect(fourth).toMatchObject({ evicted: false, status: { phase: 'Provisioning', probeFailures: 4, unreadySince: at(3).toISOString() } });
  });

  it('with the default threshold of 1 the first failure evicts; an exit the provider saw evicts at once whatever the threshold', () => {
    expect(afterFailure(ready, 'refused', { failureThreshold: 1, successThreshold: 2 }, at(1))).toMatchObject({
      evicted: true,
      status: { phase: 'Provisioning' },
    });
    expect(afterFailure(ready, 'exited', { failureThreshold: 5, successThreshold: 2 }, at(1), true)).toMatchObject({
      evicted: true,
      status: { phase: 'Provisioning', unreadySince: at(1).toISOString() },
    });
  });

  it('never changes the phase of a proxy that is not Ready, and drops a count of passes in progress', () => {
    const pending: ProxyStatus = { phase: 'Provisioning', conditions: [], observedGeneration: 1, probeSuccesses: 1, unreadySince: at(0).toISOString() };
    const next = afterFailure(pending, 'still down', { failureThreshold: 1, successThreshold: 2 }, at(5));
    expect(next.evicted).toBe(false);
    expect(next.status).toMatchObject({ phase: 'Provisioning', unreadySince: at(0).toISOString(), probeFailures: 1 });
    expect(next.status.probeSuccesses).toBeUndefined();
  });

  it('a proxy comes back after successThreshold passes of the same instance, after one for a new instance or one that never failed', () => {
    const rules = { failureThreshold: 1, successThreshold: 3 };
    const out = afterFailure(ready, 'timeout', rules, at(1)).status;
    expect(passesNeeded(out, 'i-1', rules)).toBe(3);
    expect(passesNeeded(out, 'i-2', rules)).toBe(1);
    expect(passesNeeded(ready, 'i-1', rules)).toBe(1);
    expect(passesNeeded({ phase: 'Provisioning', conditions: [], observedGeneration: 1 }, 'i-1', rules)).toBe(1);
  });

  it('keeps proxies independent: the rule reads only the status it is given', () => {
    const rules = { failureThreshold: 2, successThreshold: 1 };
    const a = afterFailure(afterFailure(ready, 'x', rules, at(1)).status, 'x', rules, at(2));
    const b = afterFailure({ ...ready, instanceId: 'i-b' }, 'x', rules, at(2));
    expect(a.evicted).toBe(true);
    expect(b).toMatchObject({ evicted: false, status: { phase: 'Ready', probeFailures: 1 } });
  });
});
