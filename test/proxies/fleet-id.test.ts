import { describe, expect, test } from 'vitest';
import { fleetOf } from '../../src/proxies/instance-name.ts';

/** A Kubernetes label value (and a Compute one): what the real apiserver accepts. */
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

describe('fleetOf: the fleet id labelling every instance', () => {
  test('a prefix ending in punctuation gives a valid label value, not one ending in "-"', () => {
    const id = fleetOf('{egress}:');
    expect(id).toMatch(/^egress-[0-9a-f]{8}$/);
    expect(id).toMatch(LABEL_VALUE);
    // …and not the plain prefix's own id: the two installations' GC must not see each other's instances.
    expect(id).not.toBe(fleetOf('{egress}'));
  });

  test('the ids that were already valid are kept as they were', () => {
    expect(fleetOf('{egress}')).toBe('egress');
    expect(fleetOf('{eu-1}')).toBe('eu-1');
    expect(fleetOf('{a}b')).toBe('ab');
    expect(fleetOf('{}')).toBe('egress');
    expect(fleetOf('{eu}prod')).toBe('euprod');
  });

  test('upper case, leading punctuation, over-long and all-punctuation prefixes all give valid, distinct label values', () => {
    const prefixes = [
      '{egress}:',
      '{egress}::',
      '{Egress}',
      '{-x}',
      '{x}-',
      '{:}',
      '{..}',
      `{${'a'.repeat(62)}}:`,
      `{${'a'.repeat(80)}}`,
      `{${'a'.repeat(61)}-b}`,
      '{test-abc}:run-',
    ];
    const ids = prefixes.map(fleetOf);
    for (const [i, id] of ids.entries()) {
      expect(id, prefixes[i]).toMatch(LABEL_VALUE);
      expect(id.length, prefixes[i]).toBeLessThanOrEqual(63);
      expect(id, prefixes[i]).toMatch(/^[a-z0-9-]+$/);
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(fleetOf('{:}')).toMatch(/^egress-[0-9a-f]{8}$/);
    expect(fleetOf('{Egress}')).toMatch(/^egress-[0-9a-f]{8}$/);
  });
});
