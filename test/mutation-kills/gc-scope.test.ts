/**
 * The GC sweep's scoping rules on an in-memory inventory: what it keeps, what it deletes and what it
 * tells the operator (events) — the rules alone, without a provider's real listing (those are in
 * test/proxies/gc*.test.ts). Written for the mutation run (docs/testing.md#mutation-testing).
 */
import { describe, expect, test } from 'vitest';
import type { NewEvent } from '../../src/events/event-sink.ts';
import { silentLogger } from '../../src/logging.ts';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { ForeignInstanceError, type DeleteTarget, type Instance, type ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { deletesInFlight, sweepProvider, type GcDeps, type GcReason } from '../../src/proxies/gc.ts';
import { instanceNameFor } from '../../src/proxies/instance-name.ts';
import type { ProxyReader } from '../../src/store/proxy-store.ts';

const FLEET = 'fleet-a';
const NOW = new Date('2026-12-01T12:00:00.000Z');
const OLD = '2026-12-01T10:00:00.000Z'; // two hours before NOW
const GRACE_MS = 10 * 60_000;

function proxy(name: string, uid: string, provider: string, specProblems?: string[]): Proxy {
  return {
    name,
    labels: {},
    spec: { provider },
    ...(specProblems ? { specProblems } : {}),
    metadata: { uid, generation: 1, createdAt: OLD },
    status: { phase: 'Ready', conditions: [] } as unknown as Proxy['status'],
  };
}

function instance(name: string, owner: { fleet: string; proxy: string }, createdAt = OLD, placement?: string): Instance {
  return { name, id: `id-${name}`, state: 'running', owner, createdAt, ...(placement ? { placement } : {}) };
}

/** A lifecycle whose inventory is `listed`; deletes are recorded, and those named in `foreign` refuse as another's. */
class ListedLifecycle implements ProxyLifecycle {
  readonly deletes: { name: string; placement: string | undefined; target: DeleteTarget }[] = [];
  constructor(
    readonly listed: Instance[],
    readonly foreign: ReadonlySet<string> = new Set(),
    readonly failing: ReadonlySet<string> = new Set(),
  ) {}
  ensureInstance(): Promise<Instance> {
    throw new Error('GC never creates');
  }
  getInstance(): Promise<Instance | undefined> {
    throw new Error('GC never reads one instance');
  }
  async deleteInstance(name: string, placement: string | undefined, target: DeleteTarget): Promise<void> {
    if (this.failing.has(name)) throw new Error(`delete of ${name} failed`);
    if (this.foreign.has(name)) throw new ForeignInstanceError(name, 'it belongs to fleet "fleet-b"');
    this.deletes.push({ name, placement, target });
  }
  async *listInstances(fleet: string): AsyncIterable<Instance> {
    expect(fleet).toBe(FLEET);
    yield* this.listed;
  }
}

function store(proxies: Proxy[]): ProxyReader {
  return {
    list: async () => proxies,
    // The re-read just before each delete (a proxy may have come back since the listing).
    get: async (name: string) => proxies.find((p) => p.name === name),
    getMany: () => Promise.reject(new Error('GC lists')),
  };
}

function deps(
  proxies: Proxy[],
  extra: Partial<GcDeps> = {},
): GcDeps & { events: { record(e: NewEvent): void }; recorded: NewEvent[]; deleted: [string, GcReason][] } {
  const recorded: NewEvent[] = [];
  const deleted: [string, GcReason][] = [];
  return {
    proxies: store(proxies),
    fleet: FLEET,
    graceMs: GRACE_MS,
    logger: silentLogger(),
    now: () => NOW,
    onDelete: (provider, reason) => deleted.push([provider, reason]),
    events: { record: (e) => recorded.push(e) },
    recorded,
    deleted,
    ...extra,
  };
}

const signal = new AbortController().signal;

describe('GC scoping', () => {
  test('an instance is owned only by a proxy on this provider: the same proxy on another provider does not keep it', async () => {
    // "web" moved from kvm to local: its old kvm instance carries the same derived name.
    const web = proxy('web', 'uid-web', 'local');
    const name = instanceNameFor(FLEET, web);
    const life = new ListedLifecycle([instance(name, { fleet: FLEET, proxy: 'web' })]);
    const d = deps([web]);
    const result = await sweepProvider('kvm', life, d, signal);
    expect(result).toEqual({ provider: 'kvm', seen: 1, kept: 0, young: 0, deleted: [{ name, reason: 'superseded' }], left: 0, refused: 0 });
    expect(life.deletes).toEqual([{ name, placement: undefined, target: { owner: { fleet: FLEET, proxy: 'web' }, nameIsOurs: false } }]);
    expect(d.deleted).toEqual([['kvm', 'superseded']]);

    // On its own provider the same instance is kept.
    const again = new ListedLifecycle([instance(name, { fleet: FLEET, proxy: 'web' })]);
    const kept = await sweepProvider('local', again, deps([web]), signal);
    expect(kept).toMatchObject({ seen: 1, kept: 1, deleted: [] });
    expect(again.deletes).toEqual([]);
  });

  test('a proxy whose stored spec could not be read keeps its instance on every provider', async () => {
    const odd = proxy('odd', 'uid-odd', 'local', ['spec.placement: must not be empty']);
    const name = instanceNameFor(FLEET, odd);
    const life = new ListedLifecycle([instance(name, { fleet: FLEET, proxy: 'odd' })]);
    const result = await sweepProvider('gcp', life, deps([odd]), signal);
    expect(result).toMatchObject({ seen: 1, kept: 1, deleted: [] });
    expect(life.deletes).toEqual([]);
  });

  test("an instance the inventory lists with another fleet's owner is kept, whatever its age", async () => {
    const life = new ListedLifecycle([instance('ep-theirs-00000000', { fleet: 'fleet-b', proxy: 'theirs' })]);
    const d = deps([]);
    const result = await sweepProvider('local', life, d, signal);
    expect(result).toEqual({ provider: 'local', seen: 1, kept: 1, young: 0, deleted: [], left: 0, refused: 0 });
    expect(life.deletes).toEqual([]);
  });

  test('young orphans wait for the grace period; old ones are deleted by reason, with events naming age and cause', async () => {
    const web = proxy('web', 'uid-web', 'local');
    const justUnder = new Date(NOW.getTime() - GRACE_MS + 1).toISOString();
    const exactly = new Date(NOW.getTime() - GRACE_MS).toISOString();
    const life = new ListedLifecycle([
      instance('ep-gone-1', { fleet: FLEET, proxy: 'gone' }, OLD, 'zone-a'),
      instance('ep-web-old', { fleet: FLEET, proxy: 'web' }),
      instance('ep-young', { fleet: FLEET, proxy: 'gone' }, justUnder),
      instance('ep-edge', { fleet: FLEET, proxy: 'gone' }, exactly),
    ]);
    const d = deps([web]);
    const result = await sweepProvider('gcp', life, d, signal);
    expect(result).toEqual({
      provider: 'gcp',
      seen: 4,
      kept: 0,
      young: 1,
      deleted: [
        { name: 'ep-gone-1', reason: 'no-proxy' },
        { name: 'ep-web-old', reason: 'superseded' },
        { name: 'ep-edge', reason: 'no-proxy' },
      ],
      left: 0,
      refused: 0,
    });
    expect(life.deletes.map((x) => [x.name, x.placement])).toEqual([
      ['ep-gone-1', 'zone-a'],
      ['ep-web-old', undefined],
      ['ep-edge', undefined],
    ]);
    expect(d.recorded).toEqual([
      {
        type: 'Normal',
        reason: 'InstanceDeleted',
        object: { kind: 'Proxy', name: 'gone' },
        provider: 'gcp',
        message: 'orphan instance ep-gone-1 on gcp/zone-a, 2h old, garbage-collected: proxy "gone" does not exist',
        details: { instance: 'ep-gone-1', cause: 'gc-orphan', gcReason: 'no-proxy', age: '2h', ageSeconds: 7200, provider: 'gcp', location: 'zone-a' },
      },
      {
        type: 'Normal',
        reason: 'InstanceDeleted',
        object: { kind: 'Proxy', name: 'web' },
        provider: 'gcp',
        message: 'orphan instance ep-web-old on gcp, 2h old, garbage-collected: proxy "web" now has another instance',
        details: { instance: 'ep-web-old', cause: 'gc-orphan', gcReason: 'superseded', age: '2h', ageSeconds: 7200, provider: 'gcp' },
      },
      {
        type: 'Normal',
        reason: 'InstanceDeleted',
        object: { kind: 'Proxy', name: 'gone' },
        provider: 'gcp',
        message: 'orphan instance ep-edge on gcp, 10m old, garbage-collected: proxy "gone" does not exist',
        details: { instance: 'ep-edge', cause: 'gc-orphan', gcReason: 'no-proxy', age: '10m', ageSeconds: 600, provider: 'gcp' },
      },
      {
        type: 'Normal',
        reason: 'GcSweep',
        object: { kind: 'ProviderHealth', name: 'gcp' },
        provider: 'gcp',
        message: 'swept 4 instance(s): 3 deleted, 0 owned, 1 too young to collect',
        details: { seen: 4, deleted: 3, kept: 0, young: 1 },
      },
    ]);
  });

  test('an instance whose delete finds another owner is refused, reported, and the sweep goes on', async () => {
    const life = new ListedLifecycle(
      [instance('ep-a', { fleet: FLEET, proxy: 'a' }, OLD, 'host-1'), instance('ep-b', { fleet: FLEET, proxy: 'b' })],
      new Set(['ep-a']),
    );
    const d = deps([]);
    const result = await sweepProvider('kvm', life, d, signal);
    expect(result).toMatchObject({ seen: 2, deleted: [{ name: 'ep-b', reason: 'no-proxy' }], refused: 1 });
    expect(d.recorded[0]).toEqual({
      type: 'Warning',
      reason: 'GcRefused',
      object: { kind: 'ProviderHealth', name: 'kvm' },
      provider: 'kvm',
      message: `not deleting "ep-a": it belongs to fleet "fleet-b": listed as this fleet's by the provider's inventory, left alone`,
      details: { instance: 'ep-a', provider: 'kvm', location: 'host-1' },
    });
    expect(d.recorded.at(-1)).toMatchObject({
      reason: 'GcSweep',
      message: 'swept 2 instance(s): 1 deleted, 0 owned, 0 too young to collect, 1 refused (not ours when read again)',
      details: { seen: 2, deleted: 1, kept: 0, young: 0, refused: 1 },
    });
  });

  test('a refused instance without a placement is reported without a location', async () => {
    const life = new ListedLifecycle([instance('ep-a', { fleet: FLEET, proxy: 'a' })], new Set(['ep-a']));
    const d = deps([]);
    await sweepProvider('local', life, d, signal);
    expect(d.recorded[0]?.details).toEqual({ instance: 'ep-a', provider: 'local' });
  });

  test('a delete that fails otherwise fails the sweep', async () => {
    const life = new ListedLifecycle([instance('ep-a', { fleet: FLEET, proxy: 'a' })], new Set(), new Set(['ep-a']));
    await expect(sweepProvider('local', life, deps([]), signal)).rejects.toThrow('delete of ep-a failed');
  });

  test('with a pace and no time left, every orphan is left for the next sweep and the sweep says so', async () => {
    const life = new ListedLifecycle([instance('ep-a', { fleet: FLEET, proxy: 'a' }), instance('ep-b', { fleet: FLEET, proxy: 'b' })]);
    const d = deps([], { deletesPerSecond: 5, deleteBudgetMs: 0 });
    const result = await sweepProvider('gcp', life, d, signal);
    expect(result).toMatchObject({ seen: 2, deleted: [], left: 2 });
    expect(life.deletes).toEqual([]);
    expect(d.recorded).toEqual([
      {
        type: 'Normal',
        reason: 'GcSweep',
        object: { kind: 'ProviderHealth', name: 'gcp' },
        provider: 'gcp',
        message: 'swept 2 instance(s): 0 deleted, 0 owned, 0 too young to collect, 2 left for the next sweep (at 5 deletions per second)',
        details: { seen: 2, deleted: 0, kept: 0, young: 0, left: 2 },
      },
    ]);
  });

  test('a budget with room for one delete at the pace deletes one and leaves the rest', async () => {
    const listed = ['a', 'b', 'c'].map((p) => instance(`ep-${p}`, { fleet: FLEET, proxy: p }));
    const life = new ListedLifecycle(listed);
    // 500 s at one delete per 1000 s: the first starts at once, the next would be past the budget.
    const result = await sweepProvider('gcp', life, deps([], { deletesPerSecond: 0.001, deleteBudgetMs: 500_000 }), signal);
    expect(result).toMatchObject({ seen: 3, deleted: [{ name: 'ep-a', reason: 'no-proxy' }], left: 2 });
  });

  test('a pace without a budget deletes every orphan', async () => {
    const listed = ['a', 'b'].map((p) => instance(`ep-${p}`, { fleet: FLEET, proxy: p }));
    const life = new ListedLifecycle(listed);
    const result = await sweepProvider('gcp', life, deps([], { deletesPerSecond: 1000 }), signal);
    expect(result).toMatchObject({ deleted: [{ name: 'ep-a' }, { name: 'ep-b' }], left: 0 });
  });

  test('deletions in flight follow the pace for ~30 s operations, from 4 to 256', () => {
    expect(deletesInFlight(0.01)).toBe(4);
    expect(deletesInFlight(0.25)).toBe(8);
    expect(deletesInFlight(5)).toBe(150);
    expect(deletesInFlight(8.55)).toBe(256);
    expect(deletesInFlight(100)).toBe(256);
  });
});
