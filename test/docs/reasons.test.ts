import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { expect, test } from 'vitest';
import { REASONS } from '../../src/health/reasons.ts';
import { ROOT } from '../support/cli.ts';

test('every reason is documented with its meaning and where to look, and nothing else is', async () => {
  const doc = await readFile(resolve(ROOT, 'docs/health-checks.md'), 'utf8');
  const rows = [...doc.matchAll(/^\| `(\w+)` \| ([^|]+) \| ([^|]+) \|$/gm)].map((m) => ({ reason: m[1], meaning: m[2]?.trim(), look: m[3]?.trim() }));
  expect(rows.map((r) => r.reason).sort()).toEqual([...REASONS].sort());
  for (const r of rows) {
    expect(r.meaning?.length, r.reason).toBeGreaterThan(10);
    expect(r.look?.length, r.reason).toBeGreaterThan(0);
  }
});
