import type { Server as HttpServer } from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, test } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import type { ReadinessPolicy } from '../../src/proxies/readiness-contract.ts';
import { reconcileProxy, type ReconcileDeps } from '../../src/proxies/reconcile.ts';
import { ProbeLoop } from '../../src/readiness/probe-loop.ts';
import { RedisProbeClaims } from '../../src/readiness/redis-probe-claims.ts';
import { reconcileProbe } from '../../src/readiness/reconcile-probe.ts';
import { MemoryProxyStore } from '../../src/store/memory-proxy-store.ts';
import { uniquePrefix } from '../support/config.ts';
import { startPausableProxy, type PausableProxy } from '../support/pausable-proxy.ts';
import { lifecycleFor, nextProbe, startEcho } from '../support/probe-loop-fixtures.ts';

/**
 * The probe loop's claims in Redis (`<prefix>:probe-claim:<proxy>`, SET NX PX), which keep one probe
 * per proxy per interval across every worker: a claim another worker holds keeps the proxy from
 * being probed here. On the run's Redis, since the claims are what workers share there; the store
 * is in memory (the eviction suite, test/readiness/eviction.test.ts, runs with no Redis at all).
 */
describe('probe claims in Redis', () => {
  let redis: Redis;
  let prefix: string;
  let store: MemoryProxyStore;
  let echo: { server: HttpServer; url: string };
  let forward: PausableProxy;
  let loop: ProbeLoop | undefined;
  const policy: ReadinessPolicy = { failureThreshold: 1, successThreshold: 2, replaceAfterMs: 300_000 };

  beforeAll(async () => {
    redis = new Redis(inject('redisUrl'));
    echo = await startEcho();
  });
  afterAll(async () => {
    redis.disconnect();
    echo.server.closeAllConnections();
    await new Promise((resolve) => echo.server.close(resolve));
  });
  beforeEach(async () => {
    prefix = uniquePrefix();
    store = new MemoryProxyStore();
    await store.apply({ metadata: { name: 'p', labels: {} }, spec: { provider: 'local' } });
    forward = await startPausableProxy((await store.credentials('p'))!);
  });
  afterEach(async () => {
    await loop?.close();
    loop = undefined;
    await forward.close();
    await store.close();
  });

  const probe = () => reconcileProbe(store, () => echo.url, 500);
  const reconcileDeps = (): ReconcileDeps => ({
    proxies: store,
    lifecycles: new Map([['local', lifecycleFor(forward)]]),
    fleet: 'test',
    probe: probe(),
    readiness: policy,
  });
  const startLoop = (): ProbeLoop => {
    loop = new ProbeLoop({
      proxies: store,
      claims: new RedisProbeClaims(redis, prefix),
      intervalMs: 300,
      rules: policy,
      probe: probe(),
      requestReconcile: async () => undefined,
      logger: silentLogger(),
    });
    loop.start();
    return loop;
  };

  test('a proxy another worker has claimed for this interval is not probed here; once the claim is gone it is', async () => {
    const signal = AbortSignal.timeout(30_000);
    expect((await reconcileProxy('p', reconcileDeps(), signal)).kind).toBe('ready');
    // A second proxy as the yardstick: by its third probe, more than two intervals have passed.
    await store.apply({ metadata: { name: 'q', labels: {} }, spec: { provider: 'local' } });
    const other = await startPausableProxy((await store.credentials('q'))!);
    try {
      const q = { ...reconcileDeps(), lifecycles: new Map([['local', lifecycleFor(other, 'proc-q')]]) };
      expect((await reconcileProxy('q', q, signal)).kind).toBe('ready');
      await redis.set(`${prefix}:probe-claim:p`, 'another-worker', 'PX', 600_000);
      const l = startLoop();
      const probedHere: string[] = [];
      l.on('probed', (e) => probedHere.push(e.proxy));
      for (let i = 0; i < 3; i++) await nextProbe(l, (e) => e.proxy === 'q');
      expect(probedHere.filter((n) => n === 'p')).toEqual([]);
      await redis.del(`${prefix}:probe-claim:p`);
      expect((await nextProbe(l, (e) => e.proxy === 'p')).verdict.ok).toBe(true);
    } finally {
      await other.close();
    }
  });
});
