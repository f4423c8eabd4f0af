/** The probe claims of one process (src/readiness/probe-claims.ts): a claim holds until it expires, then the proxy may be claimed again. */
import { describe, expect, test } from 'vitest';
import { MemoryProbeClaims } from '../../src/readiness/probe-claims.ts';

describe('MemoryProbeClaims', () => {
  test('claims each name unless a live claim holds it, answering name by name in the order asked', async () => {
    let now = 1_000;
    const claims = new MemoryProbeClaims(() => now);
    expect(await claims.claim(['a', 'b'], 500)).toEqual([true, true]);
    now += 499;
    expect(await claims.claim(['b', 'c', 'a'], 500)).toEqual([false, true, false]);
    now += 1;
    expect(await claims.claim(['a', 'b', 'c'], 500)).toEqual([true, true, false]);
  });
});
