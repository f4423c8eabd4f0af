import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runRoles, type RunningRoles } from '../../src/cli/run-roles.ts';
import type { EgressEvent } from '../../src/events/event-sink.ts';
import { silentLogger } from '../../src/logging.ts';
import { POOL_LABEL, type Pool } from '../../src/model/pool-resource.ts';
import type { ProxyView } from '../../src/proxies/discovery.ts';
import { runCli } from '../support/cli.ts';
import { testConfig } from '../support/config.ts';
import { tempDir } from '../support/temp-dirs.ts';
import { waitFor } from '../support/wait.ts';

const REPLICAS = 10;

/**
 * The issue's test: a full rotation of a 10-member pool on the local provider (real proxy processes,
 * real readiness probes through them) while a crawler-like observer polls discovery without pause;
 * every answer must hold at least `replicas` Ready members. The probe loop is off, so a Ready member
 * leaves discovery only when the pool deletes it (no member "failing" lowers the floor here).
 */
describe('a ProxyPool on the local provider', () => {
  let roles: RunningRoles;
  let api: string;
  const cli = (...args: string[]) => runCli([...args, '--api-url', api]);
  const json = async <T>(path: string): Promise<T> => (await fetch(`${api}${path}`)).json() as Promise<T>;
  const discovery = async (pool: string): Promise<ProxyView[]> =>
    (await json<{ items: ProxyView[] }>(`/v1/proxies?ready=true&label=${encodeURIComponent(`${POOL_LABEL}=${pool}`)}`)).items;

  beforeAll(async () => {
    roles = await runRoles(
      testConfig({ queues: ['reconcile'], concurrency: 6, lockDurationMs: 10_000, readiness: { intervalMs: 0 } }),
      ['worker', 'api'],
      silentLogger(),
    );
    api = roles.api?.url ?? '';
  });
  afterAll(async () => {
    // Remove whatever a failed assertion left: pools first (they delete their members), then proxies.
    for (const p of (await json<{ items: Pool[] }>('/v1/pools')).items) await fetch(`${api}/v1/pools/${p.name}`, { method: 'DELETE' });
    await waitFor('every pool gone', async () => (await json<{ items: Pool[] }>('/v1/pools')).items.length === 0, 120_000);
    for (const p of (await json<{ items: ProxyView[] }>('/v1/proxies')).items) await fetch(`${api}/v1/proxies/${p.name}`, { method: 'DELETE' });
    await waitFor('every proxy gone', async () => (await json<{ items: ProxyView[] }>('/v1/proxies')).items.length === 0, 60_000);
    await roles.close();
  });

  test('apply (mixed with a Proxy), Ready, a full rotation with discovery never below replicas, get, delete', async () => {
    const dir = await tempDir('egress-pool-e2e-');
    const file = join(dir, 'fleet.yaml');
    await writeFile(
      file,
      [
        'kind: Proxy\nmetadata: { name: solo }\nspec: { provider: local }\n',
        `kind: ProxyPool\nmetadata: { name: rot }\nspec:\n  replicas: ${REPLICAS}\n  maxSurge: 3\n  template:\n    metadata: { labels: { team: crawl } }\n    spec: { provider: local }\n`,
      ].join('---\n'),
    );
    expect(await cli('apply', '-f', file)).toEqual({ code: 0, out: 'proxy/solo created\nproxypool/rot created\n', err: '' });

    const first = await waitFor(
      '10 Ready members in discovery',
      async () => ((await discovery('rot')).length === REPLICAS ? discovery('rot') : undefined),
      180_000,
      200,
    );
    for (const m of first) expect(m.labels).toEqual({ team: 'crawl', [POOL_LABEL]: 'rot' });
    const originals = new Set(first.map((m) => m.name));
    await waitFor('the pool status to count them', async () => (await json<Pool>('/v1/pools/rot')).status.ready === REPLICAS, 30_000);
    const table = await cli('get', 'pools');
    expect(table.code).toBe(0);
    expect(table.out.split('\n')[0]).toMatch(/^NAME\s+DESIRED\s+READY\s+ROTATING\s+FAILED\s+AGE$/);
    expect(table.out.split('\n')[1]).toMatch(/^rot\s+10\s+10\s+0\s+0\s+\d+[smh]$/);

    // The observer: discovery as a crawler polls it, back to back, for the whole rotation.
    const counts: number[] = [];
    let observing = true;
    const observer = (async () => {
      while (observing) counts.push((await discovery('rot')).length);
    })();
    try {
      expect(await cli('rotate', 'pool', 'rot')).toEqual({ code: 0, out: 'proxypool/rot rotation requested (10 members to replace, surge-first)\n', err: '' });
      await waitFor(
        'every original member replaced and gone',
        async () => {
          const all = (await json<{ items: ProxyView[] }>(`/v1/proxies?label=${encodeURIComponent(`${POOL_LABEL}=rot`)}`)).items;
          return all.length === REPLICAS && all.every((m) => !originals.has(m.name) && m.status.phase === 'Ready');
        },
        240_000,
        200,
      );
    } finally {
      observing = false;
      await observer;
    }
    expect(counts.length).toBeGreaterThan(10);
    const below = counts.filter((c) => c < REPLICAS);
    expect(below, `observations below ${REPLICAS} of ${counts.length}: ${below.join(',')}`).toEqual([]);
    // Surge-first within maxSurge: never more than replicas + 3 Ready at once either.
    expect(Math.max(...counts)).toBeLessThanOrEqual(REPLICAS + 3);

    const events = await json<{ items: EgressEvent[] }>('/v1/events?kind=ProxyPool&reason=MemberDeleted&limit=100');
    expect(events.items.map((e) => e.details?.cause)).toEqual(Array.from({ length: REPLICAS }, () => 'replacement'));
    expect(events.items[0]?.message).toMatch(/^member rot-[a-z0-9]{5} on local deleted: replacement requested \(rotation requested by anonymous\)$/);
    await waitFor('the pool status to settle', async () => (await json<Pool>('/v1/pools/rot')).status.rotating === 0, 30_000);
    const one = await cli('get', 'pool', 'rot', '-o', 'json');
    const view = JSON.parse(one.out) as Pool & { members: { items: { name: string }[] } };
    expect(view.status).toMatchObject({ desired: REPLICAS, current: REPLICAS, ready: REPLICAS, rotating: 0, failed: 0 });
    expect(view.members.items).toHaveLength(REPLICAS);
    const metrics = await (await fetch(`${api}/metrics`)).text();
    expect(metrics).toContain('proxy_operator_pool_members{pool="rot",state="ready"} 10');
    expect(metrics).toContain('proxy_operator_pool_members{pool="rot",state="desired"} 10');

    expect(await cli('delete', 'pool', 'rot')).toEqual({ code: 0, out: 'proxypool/rot deletion requested (its members are deleted first)\n', err: '' });
    await waitFor('the pool and its members gone', async () => (await fetch(`${api}/v1/pools/rot`)).status === 404, 120_000, 200);
    expect((await json<{ items: ProxyView[] }>(`/v1/proxies?label=${encodeURIComponent(`${POOL_LABEL}=rot`)}`)).items).toEqual([]);
    expect((await cli('get', 'pools')).err).toBe('No pools found\n');
    expect((await cli('delete', 'proxy', 'solo')).code).toBe(0);
  });
});
