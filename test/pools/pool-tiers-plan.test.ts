import { describe, expect, test } from 'vitest';
import { poolDocumentSchema } from '../../src/model/pool-resource.ts';
import { planPool } from '../../src/pools/plan-pool.ts';
import { issueLines } from '../../src/schema/zod-helpers.ts';
import { counter, member, MIN, NOW, pool } from './plan-fixtures.ts';

/** Pool `web` spread half on `local` (tier datacenter), half on `vendor-a` (tier residential), team label from the template. */
const tiered = (replicas: number, residential: Record<string, string> = { tier: 'residential' }) =>
  pool({
    replicas,
    template: { metadata: { labels: { team: 'crawl' } }, spec: {} },
    spread: [
      { provider: 'local', weight: 1, labels: { tier: 'datacenter' } },
      { provider: 'vendor-a', weight: 1, labels: residential },
    ],
    tiers: ['datacenter', 'residential'],
  });
const labelsOf = (tier: string | undefined) => ({ team: 'crawl', 'egress-proxies.io/pool': 'web', ...(tier === undefined ? {} : { tier }) });

function plan(p: ReturnType<typeof pool>, members: Parameters<typeof member>[0][] = []) {
  const result = planPool({ pool: p, members: members.map(member), requests: new Map(), now: NOW, failedReplaceAfterMs: 2 * MIN, suffix: counter() });
  if (result.kind !== 'reconcile') throw new Error(`expected a reconcile plan, got ${result.kind}`);
  return result;
}

describe('tiers in the pool plan', () => {
  test("new members carry the template's labels, their spread entry's and the pool label", () => {
    const p = plan(tiered(4));
    expect(p.creates.map((c) => [c.spec.provider, c.labels])).toEqual([
      ['local', labelsOf('datacenter')],
      ['local', labelsOf('datacenter')],
      ['vendor-a', labelsOf('residential')],
      ['vendor-a', labelsOf('residential')],
    ]);
  });

  test("a member whose labels differ from its place's is relabelled in place; one that matches is left alone", () => {
    const p = plan(tiered(2), [
      { name: 'a', at: 'local', labels: labelsOf('datacenter') },
      { name: 'b', at: 'vendor-a', labels: labelsOf('datacenter') },
    ]);
    expect(p.creates).toEqual([]);
    expect(p.deletes).toEqual([]);
    expect(p.relabels.map((r) => [r.member.name, r.labels])).toEqual([['web-b', labelsOf('residential')]]);
  });

  test("a spread entry's labels changed: its members follow, none replaced", () => {
    const p = plan(tiered(2, { tier: 'mobile', vendor: 'a' }), [
      { name: 'a', at: 'local', labels: labelsOf('datacenter') },
      { name: 'b', at: 'vendor-a', labels: labelsOf('residential') },
    ]);
    expect(p.deletes).toEqual([]);
    expect(p.relabels.map((r) => [r.member.name, r.labels])).toEqual([['web-b', { ...labelsOf('mobile'), vendor: 'a' }]]);
  });

  test("a spread label overrides the template's of the same key", () => {
    const p = pool({
      replicas: 1,
      template: { metadata: { labels: { tier: 'datacenter' } }, spec: {} },
      spread: [{ provider: 'vendor-a', weight: 1, labels: { tier: 'residential' } }],
    });
    expect(plan(p).creates[0]?.labels).toEqual({ tier: 'residential', 'egress-proxies.io/pool': 'web' });
  });
});

describe('the schema of tiers and spread labels', () => {
  const problems = (spec: Record<string, unknown>): string[] => {
    const r = poolDocumentSchema.safeParse({ kind: 'ProxyPool', metadata: { name: 'web' }, spec: { replicas: 1, template: { spec: {} }, ...spec } });
    return r.success ? [] : issueLines(r.error);
  };
  const spread = (labels: Record<string, string>) => ({ spread: [{ provider: 'local', weight: 1, labels }] });

  test('valid: labels on a spread entry and an escalation order', () => {
    expect(problems({ ...spread({ tier: 'datacenter' }), tiers: ['datacenter', 'residential'] })).toEqual([]);
  });

  test('each error names its field', () => {
    expect(problems({ ...spread({ 'egress-proxies.io/pool': 'x' }) })).toEqual(['spec.spread[0].labels.egress-proxies.io/pool: is set by the pool itself']);
    expect(problems({ ...spread({ tier: 'no spaces' }) })).toEqual([expect.stringMatching(/^spec\.spread\[0\]\.labels\.tier: expected a label value/)]);
    expect(problems({ ...spread({}), tiers: ['a', 'b', 'a'] })).toEqual(['spec.tiers[2]: names tier "a" twice']);
    expect(problems({ ...spread({}), tiers: [] })).toEqual([expect.stringMatching(/^spec\.tiers: /)]);
    expect(problems({ ...spread({}), tiers: [''] })).toEqual([expect.stringMatching(/^spec\.tiers\[0\]: /)]);
  });
});
