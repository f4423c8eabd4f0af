import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { POOL_LABEL, poolDocumentSchema } from '../../src/model/pool-resource.ts';
import type { Proxy } from '../../src/model/proxy-resource.ts';
import { RedisMemberReplacements } from '../../src/pools/member-replacements.ts';
import { reconcilePool, type PoolReconcileDeps } from '../../src/pools/reconcile-pool.ts';
import { RedisPoolStore } from '../../src/store/redis-pool-store.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { uniquePrefix } from '../support/config.ts';

/** A deadline per pass. */
const pass = (): AbortSignal => AbortSignal.timeout(30_000);

/**
 * A proxy store that selects pool members by label, as the Kubernetes store does from the API
 * server's cache (`listPoolMembers`), which may be a moment behind: `cached` says what that read returns.
 */
class CachedMembersStore {
  readonly reads: string[] = [];
  cached: () => Promise<Proxy[]>;

  constructor(readonly store: RedisProxyStore) {
    this.cached = () => this.members();
  }

  async members(): Promise<Proxy[]> {
    return (await this.store.list()).filter((p) => p.labels[POOL_LABEL] !== undefined);
  }

  deps(pools: RedisPoolStore, replacements: RedisMemberReplacements): PoolReconcileDeps {
    const store = this.store;
    const proxies: PoolReconcileDeps['proxies'] = {
      get: (name, s) => store.get(name, s),
      getMany: (names, s) => store.getMany(names, s),
      list: (s) => {
        this.reads.push('list');
        return store.list(s);
      },
      listPoolMembers: () => {
        this.reads.push('listPoolMembers');
        return this.cached();
      },
      apply: (doc, s) => store.apply(doc, s),
      requestDeletion: (name, options, s) => store.requestDeletion(name, options, s),
    };
    return { pools, proxies, replacements, requestReconcile: async () => undefined, failedReplaceAfterMs: 60_000 };
  }
}

describe('reconcilePool with a store that selects pool members by label', () => {
  let redis: Redis;
  const stores: { close(): Promise<void> }[] = [];
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    for (const s of stores) await s.close();
    redis.disconnect();
  });

  const setup = async (replicas: number) => {
    const prefix = uniquePrefix();
    const proxies = new RedisProxyStore(redis, prefix);
    const pools = new RedisPoolStore(redis, prefix);
    stores.push(proxies, pools);
    // A plain Proxy: the label-selected read never sees it.
    await proxies.apply({ metadata: { name: 'plain', labels: {} }, spec: { provider: 'local' } });
    await pools.apply(
      poolDocumentSchema.parse({ kind: 'ProxyPool', metadata: { name: 'web' }, spec: { replicas, template: { spec: { provider: 'local' } } } }),
    );
    const cached = new CachedMembersStore(proxies);
    return { cached, pools, proxies, deps: cached.deps(pools, new RedisMemberReplacements(redis, prefix)) };
  };

  test('a pass with nothing to change reads the members by label alone, never every Proxy', async () => {
    const { cached, proxies, pools, deps } = await setup(2);
    const first = await reconcilePool('web', deps, pass());
    expect(first).toMatchObject({ kind: 'reconciled', deleted: [] });
    // It creates: it decided that from a consistent read of every Proxy.
    expect(cached.reads).toEqual(['listPoolMembers', 'list']);
    for (const m of await cached.members()) await proxies.updateStatus(m.name, (p) => ({ ...p.status, phase: 'Ready' }));

    cached.reads.length = 0;
    const second = await reconcilePool('web', deps, pass());
    expect(second).toMatchObject({ kind: 'reconciled', created: [], deleted: [], status: { current: 2, ready: 2 } });
    expect(cached.reads).toEqual(['listPoolMembers']);
    expect((await pools.get('web'))?.status.conditions).toMatchObject([{ type: 'Ready', status: 'True', reason: 'EnoughReady' }]);
  });

  test('a label-selected read that is behind (without the members just made) makes no more: the pass decides from a consistent read', async () => {
    const { cached, deps } = await setup(3);
    const first = await reconcilePool('web', deps, pass());
    expect(first.kind === 'reconciled' && first.created).toHaveLength(3);
    // The cache has not seen them yet.
    cached.cached = async () => [];
    cached.reads.length = 0;
    const second = await reconcilePool('web', deps, pass());
    expect(second).toMatchObject({ kind: 'reconciled', created: [], deleted: [], status: { current: 3 } });
    expect(cached.reads).toEqual(['listPoolMembers', 'list']);
    expect(await cached.members()).toHaveLength(3);
  });
});
