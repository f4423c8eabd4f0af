/**
 * The collections' change feed (RedisJsonCollection.changesSince, and MemoryCollection's, which the
 * memory stores keep the same way): a reader that polls gets what was written and removed since its
 * revision, every object when it is new or the feed no longer covers it, and nothing when nothing
 * changed. The pick member cache refreshes from it (and, with the Kubernetes store, from a list of
 * the pools' Proxies only).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { POOL_LABEL } from '../../src/model/pool-resource.ts';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { PoolMemberCache, type MemberSource } from '../../src/pools/pick-members.ts';
import { MemoryCollection } from '../../src/store/memory-collection.ts';
import type { CollectionChanges } from '../../src/store/json-collection.ts';
import { RedisJsonCollection } from '../../src/store/redis-json-collection.ts';
import { RedisPoolStore } from '../../src/store/redis-pool-store.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { proxyCrd, proxyPoolCrd } from '../../src/crds/definitions.ts';
import { KubernetesPoolStore } from '../../src/store/kubernetes/pool-store.ts';
import { KubernetesProxyStore } from '../../src/store/kubernetes/proxy-store.ts';
import { startFakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { uniquePrefix } from '../support/config.ts';

interface Thing {
  name: string;
  value: number;
}

let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject('redisUrl'));
});
afterAll(async () => {
  await redis.quit();
});

/** What the feed's tests use of a collection: both kinds have it. */
interface FeedCollection {
  update(name: string, update: () => Thing): Promise<unknown>;
  delete(name: string): Promise<boolean>;
  changesSince(revision: number | undefined): Promise<CollectionChanges<Thing>>;
}

const put = (c: FeedCollection, name: string, value: number): Promise<unknown> => c.update(name, () => ({ name, value }));
const names = (things: readonly Thing[]): string[] => things.map((t) => t.name).sort();

const collections: { kind: string; make: (options?: { feedLength?: number }) => FeedCollection }[] = [
  { kind: 'RedisJsonCollection', make: (options) => new RedisJsonCollection<Thing>(redis, uniquePrefix(), 'thing', options) },
  { kind: 'MemoryCollection', make: (options) => new MemoryCollection<Thing>(options) },
];

describe.each(collections)('$kind.changesSince', ({ make }) => {
  it('gives a new reader everything, then only what was written or removed since its revision', async () => {
    const c = make();
    await put(c, 'a', 1);
    await put(c, 'b', 1);
    const first = await c.changesSince(undefined);
    expect(first.full).toBe(true);
    expect(names(first.written)).toEqual(['a', 'b']);

    const quiet = await c.changesSince(first.revision);
    expect(quiet).toEqual({ revision: first.revision, full: false, written: [], removed: [] });

    await put(c, 'b', 2);
    await put(c, 'c', 1);
    await c.delete('a');
    const next = await c.changesSince(first.revision);
    expect(next.full).toBe(false);
    expect(next.written.sort((x, y) => x.name.localeCompare(y.name))).toEqual([
      { name: 'b', value: 2 },
      { name: 'c', value: 1 },
    ]);
    expect(next.removed).toEqual(['a']);
    expect(next.revision).toBeGreaterThan(first.revision);

    // An update that leaves the object as it was is no write, and a delete of nothing is none either.
    await put(c, 'c', 1);
    expect(await c.delete('nothing-here')).toBe(false);
    expect(await c.changesSince(next.revision)).toEqual({ revision: next.revision, full: false, written: [], removed: [] });
  });

  it('a name written many times is reported once, as it is now', async () => {
    const c = make();
    const start = await c.changesSince(undefined);
    for (let v = 1; v <= 5; v++) await put(c, 'a', v);
    const changes = await c.changesSince(start.revision);
    expect(changes.written).toEqual([{ name: 'a', value: 5 }]);
  });

  it('a reader the feed no longer covers gets the whole collection again', async () => {
    const c = make({ feedLength: 3 });
    await put(c, 'a', 1);
    const start = await c.changesSince(undefined);
    for (const name of ['b', 'c', 'd', 'e']) await put(c, name, 1);
    await c.delete('a');
    const behind = await c.changesSince(start.revision);
    expect(behind.full).toBe(true);
    expect(names(behind.written)).toEqual(['b', 'c', 'd', 'e']);
    // Caught up, the reader is covered again: the next write comes alone.
    await put(c, 'b', 2);
    expect(await c.changesSince(behind.revision)).toMatchObject({ full: false, written: [{ name: 'b', value: 2 }], removed: [] });
  });
});

describe('the pick member cache on the change feed', () => {
  it('follows members as they become Ready, leave and return, reading only what changed', async () => {
    const prefix = uniquePrefix();
    const proxies = new RedisProxyStore(redis, prefix);
    const pools = new RedisPoolStore(redis, prefix);
    await pools.apply({
      kind: 'ProxyPool',
      metadata: { name: 'p', labels: {} },
      spec: { replicas: 2, template: { metadata: { labels: {} }, spec: { provider: 'local' } }, maxSurge: 1 },
    });
    const member = async (name: string): Promise<void> => {
      await proxies.apply({ metadata: { name, labels: { [POOL_LABEL]: 'p' } }, spec: { provider: 'local' } });
      await proxies.updateStatus(name, (x) => ({ ...x.status, phase: 'Ready', url: `http://127.0.0.1:4999` }));
    };
    await member('p-aaaaa');
    await member('p-bbbbb');
    // The store's reads, counted: a refresh with nothing changed must not list or read proxies.
    const reads: string[] = [];
    const source: MemberSource = {
      list: (signal) => (reads.push('list'), proxies.list(signal)),
      credentialsOf: (names, signal) => (reads.push(`credentials ${names.join(',')}`), proxies.credentialsOf(names, signal)),
      changesSince: async (revision, signal) => {
        const changes = await proxies.changesSince(revision, signal);
        reads.push(`changes ${changes.full ? 'full' : changes.written.map((p: Proxy) => p.name).join(',')}`);
        return changes;
      },
    };
    const cache = new PoolMemberCache(pools, source, 0);
    const members = async (): Promise<string[]> => ((await cache.get('p'))?.members ?? []).map((m) => m.name);

    expect(await members()).toEqual(['p-aaaaa', 'p-bbbbb']);
    expect(reads).toEqual(['changes full', 'credentials p-aaaaa,p-bbbbb']);
    reads.length = 0;
    expect(await members()).toEqual(['p-aaaaa', 'p-bbbbb']);
    expect(reads).toEqual(['changes ']);

    await proxies.updateStatus('p-aaaaa', (x) => ({ ...x.status, phase: 'Provisioning' }));
    expect(await members()).toEqual(['p-bbbbb']);
    await proxies.updateStatus('p-aaaaa', (x) => ({ ...x.status, phase: 'Ready' }));
    await proxies.remove('p-bbbbb');
    reads.length = 0;
    expect(await members()).toEqual(['p-aaaaa']);
    // p-aaaaa left, so its credentials were forgotten: they are read again, once.
    expect(reads).toEqual(['changes p-aaaaa', 'credentials p-aaaaa']);
    expect(reads.filter((r) => r === 'list')).toEqual([]);
    await proxies.close();
    await pools.close();
  });
});

describe('the pick member cache on the Kubernetes store', () => {
  it('lists only the pools’ Proxies, and follows a member leaving Ready', async () => {
    const fake = await startFakeKubeApiserver();
    try {
      fake.registerCrd(proxyCrd());
      fake.registerCrd(proxyPoolCrd());
      const proxies = new KubernetesProxyStore(fake.kubeConfig(), 'default');
      const pools = new KubernetesPoolStore(fake.kubeConfig(), 'default');
      await pools.apply({
        kind: 'ProxyPool',
        metadata: { name: 'p', labels: {} },
        spec: { replicas: 2, template: { metadata: { labels: {} }, spec: { provider: 'local' } }, maxSurge: 1 },
      });
      for (const [name, labels] of [
        ['p-aaaaa', { [POOL_LABEL]: 'p' }],
        ['p-bbbbb', { [POOL_LABEL]: 'p' }],
        ['loner', {}],
      ] as const) {
        await proxies.apply({ metadata: { name, labels }, spec: { provider: 'local' } });
        await proxies.credentials(name);
        await proxies.updateStatus(name, (x) => ({ ...x.status, phase: 'Ready', url: 'http://127.0.0.1:4999' }));
      }
      const listed: string[][] = [];
      const source: MemberSource = {
        list: () => Promise.reject(new Error('the cache must not list every Proxy')),
        credentialsOf: (names, signal) => proxies.credentialsOf(names, signal),
        listPoolMembers: async (signal) => {
          const members = await proxies.listPoolMembers(signal);
          listed.push(members.map((p) => p.name));
          return members;
        },
      };
      const cache = new PoolMemberCache(pools, source, 0);
      expect((await cache.get('p'))?.members.map((m) => m.name)).toEqual(['p-aaaaa', 'p-bbbbb']);
      expect(listed).toEqual([['p-aaaaa', 'p-bbbbb']]);
      await proxies.updateStatus('p-aaaaa', (x) => ({ ...x.status, phase: 'Provisioning' }));
      expect((await cache.get('p'))?.members.map((m) => m.name)).toEqual(['p-bbbbb']);
    } finally {
      await fake.close();
    }
  });
});
