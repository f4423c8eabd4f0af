import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { freezeConfig, DEFAULT_PICK_SETTINGS, type AppConfig, type PickSettings } from '../../src/config/app.ts';
import { POOL_LABEL, type PoolDocument } from '../../src/model/pool-resource.ts';
import { RedisPoolStore } from '../../src/store/redis-pool-store.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { testConfig, type TestConfigOverrides } from '../support/config.ts';

/** testConfig with pick settings of the test's choosing (the defaults otherwise, but a member cache of 0: every pick lists). */
export function pickConfig(overrides: TestConfigOverrides = {}, picks: Partial<PickSettings> = {}): AppConfig {
  return freezeConfig({ ...testConfig(overrides), picks: { ...DEFAULT_PICK_SETTINGS, memberCacheMs: 0, ...picks } });
}

/** Writes pools and member Proxies straight into the stores under `prefix`, as the pool reconcile would leave them. */
export class PoolFixture {
  readonly redis: Redis;
  readonly pools: RedisPoolStore;
  readonly proxies: RedisProxyStore;
  /** `redisUrl`: the run's shared Redis unless a test brings its own. */
  constructor(
    readonly prefix: string,
    redisUrl: string = inject('redisUrl'),
  ) {
    this.redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    this.pools = new RedisPoolStore(this.redis, prefix);
    this.proxies = new RedisProxyStore(this.redis, prefix);
  }

  async pool(name: string, replicas: number): Promise<void> {
    await this.pools.apply({
      kind: 'ProxyPool',
      metadata: { name, labels: {} },
      spec: { replicas, template: { metadata: { labels: {} }, spec: { provider: 'local' } }, maxSurge: 1 },
    });
  }

  /** A pool with more of a spec (autoscale, budget) than `pool` writes. */
  async poolWith(name: string, spec: Partial<PoolDocument['spec']>): Promise<void> {
    await this.pools.apply({
      kind: 'ProxyPool',
      metadata: { name, labels: {} },
      spec: { template: { metadata: { labels: {} }, spec: { provider: 'local' } }, maxSurge: 1, ...spec },
    });
  }

  /** A member (or, with `pool` undefined, a proxy of no pool) with `labels` besides the pool's; Ready at `url` unless `url` is undefined. */
  async member(pool: string | undefined, name: string, url: string | undefined, labels: Record<string, string> = {}): Promise<void> {
    await this.proxies.apply({ metadata: { name, labels: pool === undefined ? labels : { ...labels, [POOL_LABEL]: pool } }, spec: { provider: 'local' } });
    if (url !== undefined) await this.ready(name, url);
  }

  async ready(name: string, url: string): Promise<void> {
    await this.proxies.updateStatus(name, (p) => ({ ...p.status, phase: 'Ready', url }));
  }

  async unready(name: string): Promise<void> {
    await this.proxies.updateStatus(name, (p) => ({ ...p.status, phase: 'Provisioning' }));
  }

  async close(): Promise<void> {
    await this.pools.close();
    await this.proxies.close();
    await this.redis.quit();
  }
}
