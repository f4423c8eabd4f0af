/**
 * The StatusStore conformance suite: the port's rules (src/store/status-store.ts), written once
 * and run against every implementation — the Redis store on the run's redis-server, the in-memory
 * one the pure tests use, and the Kubernetes store (ProviderHealth custom resources, the generated
 * CRD registered in the fake kube-apiserver) — so a test passing on one means the same on the others.
 */
import { describe, expect, it } from 'vitest';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import { MemoryStatusStore } from '../../src/store/memory-status-store.ts';
import { RedisStatusStore } from '../../src/store/redis-status-store.ts';
import type { StatusStore } from '../../src/store/status-store.ts';
import { kubernetesStoreHarness, memoryStoreHarness, redisStoreHarness, useStores, type StoreHarness } from './store-harness.ts';
import { providerHealthCrd } from '../../src/crds/definitions.ts';
import { KubernetesStatusStore } from '../../src/store/kubernetes/status-store.ts';

type Harness = StoreHarness<StatusStore & { close(): Promise<void> }>;

function redisHarness(): Harness {
  return redisStoreHarness((redis, prefix) => new RedisStatusStore(redis, prefix));
}

function memoryHarness(): Harness {
  return memoryStoreHarness(() => new MemoryStatusStore());
}

/** Each store on a fake kube-apiserver of its own (ProviderHealth is cluster-scoped: nothing else keeps two apart). */
function kubernetesHarness(): Harness {
  return kubernetesStoreHarness(providerHealthCrd(), (kc) => new KubernetesStatusStore(kc));
}

const T0 = '2026-11-01T10:00:00.000Z';

function health(name: string, targets: string[] = ['a'], ready = true): ProviderHealth {
  return {
    name,
    status: {
      ready,
      lastTransitionTime: T0,
      lastCheckTime: T0,
      targets: targets.map((t) => ({
        name: t,
        ready,
        reason: ready ? 'Ok' : 'Error',
        message: '',
        lastTransitionTime: T0,
        lastCheckTime: T0,
        durationSeconds: 0.01,
        details: { host: t },
      })),
    },
  };
}

const ended = (): AbortSignal => {
  const c = new AbortController();
  c.abort(new Error('job deadline'));
  return c.signal;
};

describe.each([redisHarness(), memoryHarness(), kubernetesHarness()])('StatusStore conformance: $name', (h) => {
  const make = useStores(h);

  it('starts empty: get gives undefined, list nothing, delete false', async () => {
    const store = await make();
    expect(await store.getProviderHealth('local')).toBeUndefined();
    expect(await store.listProviderHealth()).toEqual([]);
    expect(await store.deleteProviderHealth('local')).toBe(false);
  });

  it('update creates the object and returns what is stored; get returns the same', async () => {
    const store = await make();
    const seen: (ProviderHealth | undefined)[] = [];
    const stored = await store.updateProviderHealth('local', (current) => {
      seen.push(current);
      return health('local');
    });
    expect(seen).toEqual([undefined]);
    expect(stored).toEqual(health('local'));
    expect(await store.getProviderHealth('local')).toEqual(health('local'));
    const next = await store.updateProviderHealth('local', (current) =>
      current ? { ...current, status: { ...current.status, lastCheckTime: '2026-11-01T10:01:00.000Z' } } : undefined,
    );
    expect(next?.status.lastCheckTime).toBe('2026-11-01T10:01:00.000Z');
    expect(await store.getProviderHealth('local')).toEqual(next);
  });

  it('an update returning undefined leaves the object as it is, and creates nothing when there was none', async () => {
    const store = await make();
    expect(await store.updateProviderHealth('none', () => undefined)).toBeUndefined();
    expect(await store.getProviderHealth('none')).toBeUndefined();
    expect(await store.listProviderHealth()).toEqual([]);
    await store.updateProviderHealth('local', () => health('local'));
    expect(await store.updateProviderHealth('local', () => undefined)).toEqual(health('local'));
  });

  it('lists every object, sorted by name', async () => {
    const store = await make();
    for (const name of ['kvm-b', 'gce', 'local', 'kvm-a']) await store.updateProviderHealth(name, () => health(name));
    expect((await store.listProviderHealth()).map((ph) => ph.name)).toEqual(['gce', 'kvm-a', 'kvm-b', 'local']);
  });

  it('delete removes the object from get and list, once', async () => {
    const store = await make();
    await store.updateProviderHealth('gone', () => health('gone'));
    await store.updateProviderHealth('kept', () => health('kept'));
    expect(await store.deleteProviderHealth('gone')).toBe(true);
    expect(await store.deleteProviderHealth('gone')).toBe(false);
    expect(await store.getProviderHealth('gone')).toBeUndefined();
    expect((await store.listProviderHealth()).map((ph) => ph.name)).toEqual(['kept']);
  });

  it('concurrent updates of one object lose none of each other’s changes', async () => {
    const store = await make();
    const targets = Array.from({ length: 25 }, (_, i) => `t${String(i).padStart(2, '0')}`);
    await Promise.all(
      targets.map((t) =>
        store.updateProviderHealth('busy', (current) => {
          const base = current ?? health('busy', []);
          return { ...base, status: { ...base.status, targets: [...base.status.targets, ...health('busy', [t]).status.targets] } };
        }),
      ),
    );
    expect((await store.getProviderHealth('busy'))?.status.targets.map((t) => t.name).sort()).toEqual(targets);
  });

  it('hands out copies: changing what it returned, or what an update returned, changes nothing stored', async () => {
    const store = await make();
    const written = health('local');
    const stored = await store.updateProviderHealth('local', () => written);
    written.status.ready = false;
    stored!.status.targets.push(health('x', ['x']).status.targets[0]!);
    const got = await store.getProviderHealth('local');
    got!.status.lastCheckTime = 'mutated';
    (await store.listProviderHealth())[0]!.name = 'mutated';
    expect(await store.getProviderHealth('local')).toEqual(health('local'));
  });

  it('a call whose signal has ended rejects and writes nothing', async () => {
    const store = await make();
    await expect(store.updateProviderHealth('local', () => health('local'), ended())).rejects.toThrow('job deadline');
    await expect(store.getProviderHealth('local', ended())).rejects.toThrow('job deadline');
    await expect(store.listProviderHealth(ended())).rejects.toThrow('job deadline');
    expect(await store.listProviderHealth()).toEqual([]);
    await store.updateProviderHealth('local', () => health('local'));
    await expect(store.deleteProviderHealth('local', ended())).rejects.toThrow('job deadline');
    expect(await store.getProviderHealth('local')).toEqual(health('local'));
  });

  it('two stores are separate: one never sees the other’s objects', async () => {
    const one = await make();
    const two = await make();
    await one.updateProviderHealth('local', () => health('local'));
    expect(await two.getProviderHealth('local')).toBeUndefined();
    expect(await two.listProviderHealth()).toEqual([]);
  });
});
