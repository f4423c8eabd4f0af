import { afterAll, describe, expect, test } from 'vitest';
import { MemoryEventStore } from '../../src/events/memory-event-store.ts';
import { POOL_LABEL, poolDocumentSchema, type PoolDocument } from '../../src/model/pool-resource.ts';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { reconcilePool, SAFETY_LOOK_MS, type PoolReconcileDeps } from '../../src/pools/reconcile-pool.ts';
import { withReadyCondition } from '../../src/proxies/conditions.ts';
import { placeTargets } from '../../src/pools/spread.ts';
import type { ReadinessProbe } from '../../src/proxies/readiness-contract.ts';
import { reconcileProxy, type ReconcileDeps } from '../../src/proxies/reconcile.ts';
import { MemoryMemberReplacements } from '../../src/store/memory-member-replacements.ts';
import { MemoryPoolStore } from '../../src/store/memory-pool-store.ts';
import { MemoryProxyStore } from '../../src/store/memory-proxy-store.ts';
import { memberChanged } from '../../src/pools/member-changed.ts';
import { RecordingLifecycle } from '../support/recording-lifecycle.ts';

const signal = AbortSignal.timeout(60_000);

/** A pool document as a user writes it (defaults filled in by the schema). */
function poolDoc(name: string, spec: Record<string, unknown>): PoolDocument {
  return poolDocumentSchema.parse({ kind: 'ProxyPool', metadata: { name }, spec: { template: { spec: { provider: 'local' } }, ...spec } });
}

/**
 * The pool reconcile against the memory stores (held to the Redis stores' rules by the conformance
 * suites in test/store/; no Redis), with members reconciled by the real proxy reconcile on recording
 * lifecycles: `settle()` runs every member reconcile the pool asked for, as workers would.
 */
class Harness {
  t = Date.parse('2026-11-01T10:00:00.000Z');
  readonly now = (): Date => new Date(this.t);
  readonly proxies = new MemoryProxyStore(this.now);
  readonly pools = new MemoryPoolStore(this.now);
  readonly replacements = new MemoryMemberReplacements(this.now);
  readonly events = new MemoryEventStore({ maxCount: 10_000, maxAgeMs: 86_400_000 }, () => this.t);
  readonly lifecycles = new Map([
    ['local', new RecordingLifecycle()],
    ['gcp', new RecordingLifecycle()],
    ['kvm', new RecordingLifecycle()],
  ]);
  /** Members whose readiness probe fails (they stay Provisioning). */
  readonly unready = new Set<string>();
  readonly requested: string[] = [];

  poolDeps(): PoolReconcileDeps {
    return {
      pools: this.pools,
      proxies: this.proxies,
      replacements: this.replacements,
      requestReconcile: async (name) => {
        this.requested.push(name);
      },
      failedReplaceAfterMs: 60_000,
      events: this.events.sink('worker'),
      now: this.now,
    };
  }

  proxyDeps(): ReconcileDeps {
    const probe: ReadinessProbe = async (_endpoint, proxy) =>
      this.unready.has(proxy.name) ? { ok: false, cause: 'refused', message: 'tcp: connection refused' } : { ok: true, egressIp: '127.0.0.1' };
    return { proxies: this.proxies, lifecycles: this.lifecycles, fleet: 'test', probe, now: this.now };
  }

  reconcile(name: string): ReturnType<typeof reconcilePool> {
    return reconcilePool(name, this.poolDeps(), signal);
  }

  /** Runs the member reconciles asked for so far (as the reconcile queue would). */
  async settle(): Promise<void> {
    while (this.requested.length > 0) {
      const name = this.requested.shift() as string;
      await reconcileProxy(name, this.proxyDeps(), signal);
    }
  }

  /** Reconciles the pool and its members until nothing changes (at most `rounds` times). */
  async converge(pool: string, rounds = 20): Promise<void> {
    for (let i = 0; i < rounds; i++) {
      const outcome = await this.reconcile(pool);
      await this.settle();
      if (outcome.kind !== 'reconciled' || (outcome.created.length === 0 && outcome.deleted.length === 0)) return;
    }
    throw new Error(`pool ${pool} did not converge in ${rounds} rounds`);
  }

  async members(pool: string): Promise<Proxy[]> {
    return (await this.proxies.list()).filter((p) => p.labels[POOL_LABEL] === pool);
  }

  async live(pool: string): Promise<Proxy[]> {
    return (await this.members(pool)).filter((p) => !p.metadata.deletionRequestedAt);
  }

  async close(): Promise<void> {
    await this.proxies.close();
    await this.pools.close();
  }
}

describe('placeTargets: spread by weight, largest remainder', () => {
  test('counts add up to replicas and each is within ±1 of its weighted share, for many weights and sizes', () => {
    const weightSets = [[1], [7, 3], [1, 1, 1], [70, 30], [5, 3, 2], [1, 1000], [3, 3, 3, 1], [13, 7, 1, 1, 1]];
    for (const weights of weightSets) {
      for (let replicas = 0; replicas <= 60; replicas++) {
        const spread = weights.map((weight, i) => ({ provider: 'local', placement: `z${i}`, weight }));
        const targets = placeTargets(poolDoc('s', { replicas, spread }).spec);
        const total = weights.reduce((a, b) => a + b, 0);
        expect(targets.reduce((sum, t) => sum + t.count, 0)).toBe(replicas);
        for (const [i, t] of targets.entries()) {
          const exact = (replicas * (weights[i] ?? 0)) / total;
          expect(Math.abs(t.count - exact), `weights ${weights.join('/')} replicas ${replicas} entry ${i}`).toBeLessThan(1);
        }
      }
    }
  });

  test('70/30 of 10 is 7 and 3; 1/1/1 of 10 gives the extra member to the first entry; no spread: the template place', () => {
    const counts = (replicas: number, weights: number[]) =>
      placeTargets(poolDoc('s', { replicas, spread: weights.map((weight, i) => ({ provider: 'local', placement: `z${i}`, weight })) }).spec).map(
        (t) => t.count,
      );
    expect(counts(10, [70, 30])).toEqual([7, 3]);
    expect(counts(10, [1, 1, 1])).toEqual([4, 3, 3]);
    // 1.5, 0.9, 0.6: the floors give one member, the two left go to the largest remainders.
    expect(counts(3, [5, 3, 2])).toEqual([1, 1, 1]);
    expect(placeTargets(poolDoc('s', { replicas: 4, template: { spec: { provider: 'kvm', placement: 'h1' } } }).spec)).toEqual([
      { place: { provider: 'kvm', placement: 'h1' }, count: 4 },
    ]);
  });
});

describe('reconcilePool', () => {
  const harnesses: Harness[] = [];
  const harness = (): Harness => {
    const h = new Harness();
    harnesses.push(h);
    return h;
  };

  afterAll(async () => {
    for (const h of harnesses) await h.close();
  });

  test('creates members named <pool>-<5 characters>, labelled, spread 70/30 across providers; all Ready makes the pool Ready', async () => {
    const h = harness();
    await h.pools.apply(
      poolDoc('web', {
        replicas: 10,
        template: { metadata: { labels: { team: 'crawl' } }, spec: {} },
        spread: [
          { provider: 'gcp', placement: 'us-east1-b', weight: 70 },
          { provider: 'kvm', weight: 30 },
        ],
      }),
    );
    const first = await h.reconcile('web');
    expect(first).toMatchObject({ kind: 'reconciled', deleted: [] });
    expect(first.kind === 'reconciled' && first.created.length).toBe(10);
    await h.settle();
    const members = await h.members('web');
    expect(members).toHaveLength(10);
    for (const m of members) {
      expect(m.name).toMatch(/^web-[a-z0-9]{5}$/);
      expect(m.labels).toEqual({ team: 'crawl', [POOL_LABEL]: 'web' });
      expect(m.status.phase).toBe('Ready');
    }
    expect(members.filter((m) => m.spec.provider === 'gcp' && m.spec.placement === 'us-east1-b')).toHaveLength(7);
    expect(members.filter((m) => m.spec.provider === 'kvm' && m.spec.placement === undefined)).toHaveLength(3);
    const again = await h.reconcile('web');
    expect(again).toMatchObject({ kind: 'reconciled', created: [], deleted: [] });
    expect((await h.pools.get('web'))?.status).toMatchObject({
      desired: 10,
      current: 10,
      ready: 10,
      rotating: 0,
      failed: 0,
      observedGeneration: 1,
      conditions: [{ type: 'Ready', status: 'True', reason: 'EnoughReady', message: '10 of 10 members ready' }],
    });
    const created = await h.events.list({ reason: 'MemberCreated', limit: 100 });
    expect(created).toHaveLength(10);
    expect(created[0]).toMatchObject({ object: { kind: 'ProxyPool', name: 'web' }, details: { cause: 'scale' } });
  });

  test('a changed spread rebalances surge-first: members in places no longer wanted leave only once Ready replacements stand', async () => {
    const h = harness();
    const spread = (a: number, b: number) => [
      { provider: 'gcp', placement: 'a', weight: a },
      { provider: 'kvm', placement: 'b', weight: b },
    ];
    await h.pools.apply(poolDoc('sp', { replicas: 4, maxSurge: 1, template: { spec: {} }, spread: spread(1, 1) }));
    await h.converge('sp');
    await h.pools.apply(poolDoc('sp', { replicas: 4, maxSurge: 1, template: { spec: {} }, spread: [{ provider: 'gcp', placement: 'a', weight: 1 }] }));
    for (let i = 0; i < 20; i++) {
      const outcome = await h.reconcile('sp');
      const live = await h.live('sp');
      expect(live.length).toBeLessThanOrEqual(5);
      expect(live.filter((m) => m.status.phase === 'Ready').length).toBeGreaterThanOrEqual(4);
      await h.settle();
      if (outcome.kind === 'reconciled' && outcome.created.length === 0 && outcome.deleted.length === 0) break;
    }
    const live = await h.live('sp');
    expect(live.map((m) => `${m.spec.provider}/${m.spec.placement ?? ''}`)).toEqual(['gcp/a', 'gcp/a', 'gcp/a', 'gcp/a']);
    expect((await h.events.list({ reason: 'MemberDeleted', limit: 100 })).map((e) => e.details?.cause)).toEqual(['spread', 'spread']);
  });

  test('scale down removes the least healthy first (Failed, then not Ready), then the oldest', async () => {
    const h = harness();
    await h.pools.apply(poolDoc('sd', { replicas: 1 }));
    const names: string[] = [];
    // Five members one minute apart, so that their ages differ.
    for (let i = 0; i < 5; i++) {
      await h.pools.apply(poolDoc('sd', { replicas: i + 1 }));
      const outcome = await h.reconcile('sd');
      if (outcome.kind === 'reconciled') names.push(...outcome.created);
      await h.settle();
      h.t += 60_000;
    }
    expect(names).toHaveLength(5);
    const [oldest, second, third, failed, unready] = names as [string, string, string, string, string];
    await h.proxies.updateStatus(failed, (p) => withReadyCondition({ ...p.status, phase: 'Failed', lastError: 'quota exceeded' }, h.now()));
    h.unready.add(unready);
    await h.proxies.updateStatus(unready, (p) => withReadyCondition({ ...p.status, phase: 'Provisioning' }, h.now()));

    await h.pools.apply(poolDoc('sd', { replicas: 3 }));
    expect(await h.reconcile('sd')).toMatchObject({ kind: 'reconciled', created: [], deleted: [failed, unready] });
    await h.pools.apply(poolDoc('sd', { replicas: 1 }));
    expect(await h.reconcile('sd')).toMatchObject({ kind: 'reconciled', created: [], deleted: [oldest, second] });
    await h.settle();
    expect((await h.members('sd')).map((m) => m.name)).toEqual([third]);
    expect((await h.events.list({ reason: 'MemberDeleted', limit: 100 })).map((e) => e.details?.cause)).toEqual(['scale', 'scale', 'scale', 'scale']);
  });

  test('rotation at maxAge: never more than replicas + maxSurge members, never fewer than replicas Ready, every old member replaced', async () => {
    const h = harness();
    await h.pools.apply(poolDoc('rot', { replicas: 4, maxSurge: 1, maxAge: '1m' }));
    // While members come up, a safety look; once they are Ready, the look is when the first reaches maxAge.
    expect(await h.reconcile('rot')).toMatchObject({ kind: 'reconciled', lookAfterMs: SAFETY_LOOK_MS });
    await h.settle();
    h.t += 1000;
    expect(await h.reconcile('rot')).toMatchObject({ kind: 'reconciled', created: [], lookAfterMs: 59_000 });
    const originals = new Set((await h.members('rot')).map((m) => m.name));
    h.t += 61_000;
    let rounds = 0;
    for (; rounds < 30; rounds++) {
      const outcome = await h.reconcile('rot');
      const live = await h.live('rot');
      expect(live.length, `round ${rounds}`).toBeLessThanOrEqual(5);
      expect(live.filter((m) => m.status.phase === 'Ready').length, `round ${rounds}`).toBeGreaterThanOrEqual(4);
      await h.settle();
      if (live.every((m) => !originals.has(m.name)) && outcome.kind === 'reconciled' && outcome.created.length === 0) break;
    }
    const live = await h.live('rot');
    expect(live).toHaveLength(4);
    expect(live.some((m) => originals.has(m.name))).toBe(false);
    expect((await h.members('rot')).length).toBe(4);
    const causes = (await h.events.list({ reason: 'MemberDeleted', limit: 100 })).map((e) => e.details?.cause);
    expect(causes).toEqual(['rotation', 'rotation', 'rotation', 'rotation']);
    // The new members are young: the next look is when the first of them reaches maxAge.
    const settled = await h.reconcile('rot');
    expect(settled.kind === 'reconciled' && settled.lookAfterMs).toBeGreaterThan(0);
    expect(settled.kind === 'reconciled' && settled.lookAfterMs).toBeLessThanOrEqual(60_000);
  });

  test('while a replacement is not Ready the old member stays; a maxSurge of 2 replaces two at a time', async () => {
    const h = harness();
    await h.pools.apply(poolDoc('surge', { replicas: 3, maxSurge: 2, maxAge: '1m' }));
    await h.converge('surge');
    h.t += 61_000;
    // Replacements come up but fail their probes: nothing old may go.
    const outcome = await h.reconcile('surge');
    expect(outcome).toMatchObject({ kind: 'reconciled', deleted: [] });
    const created = outcome.kind === 'reconciled' ? outcome.created : [];
    expect(created).toHaveLength(2);
    for (const name of created) h.unready.add(name);
    await h.settle();
    expect(await h.reconcile('surge')).toMatchObject({ kind: 'reconciled', created: [], deleted: [] });
    expect((await h.pools.get('surge'))?.status).toMatchObject({ desired: 3, current: 5, ready: 3, rotating: 5 });
    // They become Ready: two old ones go at once, and one more replacement is made.
    h.unready.clear();
    // Back after failed probes: the same instance passes --probe-successes (2) probes in a row.
    for (const name of created) for (const _pass of [1, 2]) await reconcileProxy(name, h.proxyDeps(), signal);
    const next = await h.reconcile('surge');
    expect(next.kind === 'reconciled' && next.deleted).toHaveLength(2);
    expect(next.kind === 'reconciled' && next.created).toHaveLength(1);
  });

  test('a replacement request (ban feedback) replaces that member surge-first and is cleared once the member is gone', async () => {
    const h = harness();
    await h.pools.apply(poolDoc('ban', { replicas: 2 }));
    await h.converge('ban');
    const [victim] = (await h.members('ban')).map((m) => m.name) as [string];
    expect(await h.replacements.request('ban', victim, 'blocked on 3 domains within 10m')).toBe(true);
    const first = await h.reconcile('ban');
    expect(first).toMatchObject({ kind: 'reconciled', deleted: [] });
    expect(first.kind === 'reconciled' && first.created).toHaveLength(1);
    await h.settle();
    expect(await h.reconcile('ban')).toMatchObject({ kind: 'reconciled', created: [], deleted: [victim] });
    expect((await h.replacements.list('ban')).has(victim)).toBe(true);
    await h.settle();
    await h.reconcile('ban');
    expect((await h.replacements.list('ban')).size).toBe(0);
    expect((await h.members('ban')).map((m) => m.name)).not.toContain(victim);
    const deleted = await h.events.list({ reason: 'MemberDeleted', limit: 10 });
    expect(deleted[0]?.message).toContain('replacement requested (blocked on 3 domains within 10m)');
  });

  test('a member that is not Ready is replaced without waiting; a Failed one after failedReplaceAfterMs', async () => {
    const h = harness();
    await h.pools.apply(poolDoc('heal', { replicas: 2 }));
    await h.converge('heal');
    const [a, b] = (await h.members('heal')).map((m) => m.name) as [string, string];
    await h.proxies.updateStatus(a, (p) => withReadyCondition({ ...p.status, phase: 'Failed', lastError: 'image not found' }, h.now()));
    await h.proxies.updateStatus(b, (p) => withReadyCondition({ ...p.status, phase: 'Provisioning' }, h.now()));
    await h.replacements.request('heal', b, 'blocked');
    const outcome = await h.reconcile('heal');
    // b (asked to be replaced, not Ready) goes at once; a is Failed but not yet for long.
    expect(outcome).toMatchObject({ kind: 'reconciled', deleted: [b] });
    expect(outcome.kind === 'reconciled' && outcome.created).toHaveLength(1);
    expect(outcome.kind === 'reconciled' && outcome.lookAfterMs).toBeLessThanOrEqual(60_000);
    await h.settle();
    h.t += 61_000;
    const later = await h.reconcile('heal');
    expect(later).toMatchObject({ kind: 'reconciled', deleted: [a] });
    expect(later.kind === 'reconciled' && later.created).toHaveLength(1);
    expect((await h.events.list({ reason: 'MemberDeleted', limit: 10 })).map((e) => [e.type, e.details?.cause])).toEqual([
      ['Normal', 'replacement'],
      ['Warning', 'failed'],
    ]);
  });

  test('template labels are followed in place; deleting the pool deletes its members, then the pool', async () => {
    const h = harness();
    await h.pools.apply(poolDoc('gone', { replicas: 3 }));
    await h.converge('gone');
    const before = (await h.members('gone')).map((m) => m.name).sort();
    await h.pools.apply(poolDoc('gone', { replicas: 3, template: { metadata: { labels: { tier: 'gold' } }, spec: { provider: 'local' } } }));
    expect(await h.reconcile('gone')).toMatchObject({ created: [], deleted: [] });
    await h.settle();
    const after = await h.members('gone');
    expect(after.map((m) => m.name).sort()).toEqual(before);
    for (const m of after) expect(m.labels).toEqual({ tier: 'gold', [POOL_LABEL]: 'gone' });
    expect((await h.pools.get('gone'))?.status.observedGeneration).toBe(2);

    await h.pools.requestDeletion('gone');
    expect(await h.reconcile('gone')).toEqual({ kind: 'deleting', remaining: 3 });
    expect((await h.members('gone')).every((m) => m.status.phase === 'Terminating')).toBe(true);
    expect((await h.pools.get('gone'))?.status).toMatchObject({ desired: 0, current: 0, conditions: [{ status: 'False', reason: 'Terminating' }] });
    await h.settle();
    expect(await h.members('gone')).toEqual([]);
    expect(h.lifecycles.get('local')?.instances.size).toBe(0);
    expect(await h.reconcile('gone')).toEqual({ kind: 'deleted' });
    expect(await h.pools.get('gone')).toBeUndefined();
    expect(await h.reconcile('gone')).toEqual({ kind: 'gone' });
  });

  test('a pool deleted while a pass creates its members creates none after the delete is accepted, and its pass turns to deleting', async () => {
    const h = harness();
    await h.pools.apply(poolDoc('big', { replicas: 200 }));
    const deps = h.poolDeps();
    let created = 0;
    let createdWhenDeleted: number | undefined;
    deps.proxies = {
      get: (name, s) => h.proxies.get(name, s),
      getMany: (names, s) => h.proxies.getMany(names, s),
      list: (s) => h.proxies.list(s),
      requestDeletion: (name, options, s) => h.proxies.requestDeletion(name, options, s),
      apply: async (doc, s) => {
        const applied = await h.proxies.apply(doc, s);
        if (applied.outcome === 'created') created++;
        // `egress delete pool big` accepted while the pass is at its fifth member.
        if (created === 5 && createdWhenDeleted === undefined) {
          await h.pools.requestDeletion('big');
          createdWhenDeleted = created;
        }
        return applied;
      },
    };
    const outcome = await reconcilePool('big', deps, signal);
    expect(createdWhenDeleted).toBe(5);
    expect(created).toBe(5);
    expect(outcome).toEqual({ kind: 'deleting', remaining: 5 });
    expect((await h.members('big')).map((m) => m.status.phase)).toEqual(Array.from({ length: 5 }, () => 'Terminating'));
    await h.settle();
    expect(await h.reconcile('big')).toEqual({ kind: 'deleted' });
  });

  test('a pool written around the API (kubectl, where the CRD cannot check every rule) makes no members and says why', async () => {
    const h = harness();
    // Neither a provider nor a spread, and the reserved label in the template: the API refuses both.
    const doc = {
      kind: 'ProxyPool',
      metadata: { name: 'lax', labels: {} },
      spec: { replicas: 2, maxSurge: 1, template: { metadata: { labels: { [POOL_LABEL]: 'x' } }, spec: {} } },
    };
    await h.pools.apply(doc as unknown as PoolDocument);
    const outcome = await h.reconcile('lax');
    expect(outcome).toMatchObject({ kind: 'invalid' });
    expect(await h.members('lax')).toEqual([]);
    const status = (await h.pools.get('lax'))?.status;
    expect(status?.lastError).toContain('spec.template.spec.provider: required when spec.spread is not given');
    expect(status?.lastError).toContain('is set by the pool itself');
    expect(status?.conditions).toMatchObject([{ type: 'Ready', status: 'False', reason: 'InvalidSpec' }]);
    // Fixed: members are made, and the error is gone.
    await h.pools.apply(poolDoc('lax', { replicas: 2 }));
    await h.converge('lax');
    expect(await h.members('lax')).toHaveLength(2);
    expect((await h.pools.get('lax'))?.status.lastError).toBeUndefined();
  });

  test('members of a pool that vanished without its reconcile (kubectl delete before the finalizer) are deleted', async () => {
    const h = harness();
    await h.pools.apply(poolDoc('vanished', { replicas: 2 }));
    await h.converge('vanished');
    await h.pools.remove('vanished');
    expect(await h.reconcile('vanished')).toEqual({ kind: 'gone' });
    expect((await h.members('vanished')).map((m) => m.status.phase)).toEqual(['Terminating', 'Terminating']);
    await h.settle();
    expect(await h.members('vanished')).toEqual([]);
  });

  test('a member asks for its pool only when its readiness changed or it is gone; a plain Proxy never', () => {
    const member = (phase: Proxy['status']['phase']) => ({ labels: { [POOL_LABEL]: 'p' }, status: { phase } }) as unknown as Proxy;
    expect(memberChanged(member('Provisioning'), { kind: 'ready', url: 'http://x' })).toBe(true);
    expect(memberChanged(member('Ready'), { kind: 'ready', url: 'http://x' })).toBe(false);
    expect(memberChanged(member('Ready'), { kind: 'retry-later', why: 'probe failed' })).toBe(true);
    expect(memberChanged(member('Provisioning'), { kind: 'retry-later', why: 'starting' })).toBe(false);
    expect(memberChanged(member('Provisioning'), { kind: 'failed', message: 'quota' })).toBe(true);
    expect(memberChanged(member('Failed'), { kind: 'failed', message: 'quota' })).toBe(false);
    expect(memberChanged(member('Terminating'), { kind: 'deleted' })).toBe(true);
    expect(memberChanged({ labels: {}, status: { phase: 'Provisioning' } } as unknown as Proxy, { kind: 'ready', url: 'http://x' })).toBe(false);
    expect(memberChanged(undefined, { kind: 'gone' })).toBe(false);
  });
});
