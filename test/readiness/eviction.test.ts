import { once } from 'node:events';
import type { Server as HttpServer } from 'node:http';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, test } from 'vitest';
import { proxyRoutes } from '../../src/api/routes/proxies.ts';
import { silentLogger } from '../../src/logging.ts';
import { createReconcileMetrics } from '../../src/metrics/proxy-metrics.ts';
import type { Instance, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { reconcileProxy, type ReadinessPolicy, type ReconcileDeps } from '../../src/proxies/reconcile.ts';
import { echoRoute } from '../../src/readiness/echo.ts';
import { ProbeLoop, type ProbeEvent } from '../../src/readiness/probe-loop.ts';
import { reconcileProbe } from '../../src/readiness/reconcile-probe.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { MemoryWorkRequests } from '../../src/work/memory-work-requests.ts';
import { uniquePrefix } from '../support/config.ts';
import { startPausableProxy, type PausableProxy } from '../support/pausable-proxy.ts';

/**
 * The eviction rule end to end on real parts: a real forward proxy that the test pauses (it keeps
 * accepting connections and answers nothing, like a SIGSTOPped process), the real probe through it
 * to a real echo endpoint, the probe loop, the store in Redis and the discovery route with its ETag.
 */

function startEcho(): Promise<{ server: HttpServer; url: string }> {
  const app = new Hono();
  app.route('/v1', echoRoute());
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info) =>
      resolve({ server, url: `http://127.0.0.1:${info.port}/v1/echo` }),
    ) as HttpServer;
  });
}

/** A lifecycle whose one instance is the test's forward proxy (the provider part is not under test here). */
function lifecycleFor(proxy: { port: number }, id = 'proc-1'): ProxyLifecycle {
  const instance = (name: string): Instance => ({
    name,
    id,
    state: 'running',
    owner: { fleet: 'test', proxy: 'p' },
    createdAt: new Date().toISOString(),
    endpoint: { host: '127.0.0.1', port: proxy.port },
  });
  return {
    ensureInstance: async (spec) => instance(spec.name),
    getInstance: async (name) => instance(name),
    deleteInstance: async () => undefined,
    async *listInstances() {},
  };
}

/** Waits for the first `probed` event of `proxy` that `accept` takes. */
function nextProbe(loop: ProbeLoop, accept: (e: ProbeEvent) => boolean): Promise<ProbeEvent> {
  return new Promise((resolve) => {
    const on = (e: ProbeEvent): void => {
      if (!accept(e)) return;
      loop.off('probed', on);
      resolve(e);
    };
    loop.on('probed', on);
  });
}

describe('eviction on the first failed probe', () => {
  let redis: Redis;
  let prefix: string;
  let store: RedisProxyStore;
  // The work-requests port in memory: the reconciles an eviction asks for, with no queue.
  let work: MemoryWorkRequests;
  let echo: { server: HttpServer; url: string };
  let forward: PausableProxy;
  let loop: ProbeLoop | undefined;
  let registry: Registry;
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
    store = new RedisProxyStore(redis.duplicate(), prefix);
    work = new MemoryWorkRequests();
    registry = new Registry();
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
  const reconcileDeps = (): ReconcileDeps => {
    const metrics = createReconcileMetrics(registry);
    return {
      proxies: store,
      lifecycles: new Map([['local', lifecycleFor(forward)]]),
      fleet: 'test',
      probe: probe(),
      readiness: policy,
      onEvicted: (provider, cause, ready) => metrics.evicted(provider, cause, ready),
    };
  };
  const startLoop = (failureThreshold = 1): ProbeLoop => {
    const metrics = createReconcileMetrics(registry);
    loop = new ProbeLoop({
      proxies: store,
      redis,
      prefix,
      intervalMs: 300,
      rules: { ...policy, failureThreshold },
      probe: probe(),
      requestReconcile: (name) => work.reconcileProxy(name),
      hooks: { onProbe: (p, ok, s) => metrics.probe(p, ok, s), onEvicted: (p, c, r) => metrics.evicted(p, c, r) },
      logger: silentLogger(),
    });
    loop.start();
    return loop;
  };
  const api = () => proxyRoutes({ proxies: store, providers: ['local'], work });
  const discover = async (etag?: string) => {
    const res = await api().request('/proxies?ready=true', { headers: etag ? { 'if-none-match': etag } : {} });
    const body = res.status === 200 ? ((await res.json()) as { items: { name: string }[] }) : undefined;
    return { status: res.status, etag: res.headers.get('etag') ?? '', names: body?.items.map((i) => i.name) };
  };

  test('a proxy that stops answering leaves discovery on its first timed-out probe, the ETag changes, and it returns after --probe-successes passes', async () => {
    const signal = AbortSignal.timeout(30_000);
    expect((await reconcileProxy('p', reconcileDeps(), signal)).kind).toBe('ready');
    const ready = await discover();
    expect(ready.names).toEqual(['p']);

    const l = startLoop();
    // Passing probes write nothing: discovery answers 304 to the same ETag after several of them.
    for (let i = 0; i < 3; i++) expect((await nextProbe(l, (e) => e.proxy === 'p')).verdict.ok).toBe(true);
    expect((await discover(ready.etag)).status).toBe(304);

    const held = once(forward, 'held');
    forward.pause();
    const evicted = await nextProbe(l, (e) => e.outcome === 'evicted');
    await held;
    expect(evicted.verdict).toMatchObject({ ok: false, cause: 'timeout' });
    expect((await store.get('p'))?.status).toMatchObject({ phase: 'Provisioning', probeFailures: 1 });
    // A crawler polling with If-None-Match sees the change on its next poll.
    const after = await discover(ready.etag);
    expect(after).toMatchObject({ status: 200, names: [] });
    expect(after.etag).not.toBe(ready.etag);
    expect(work.proxyReconciles()).toEqual(['p']);
    expect(await registry.getSingleMetricAsString('proxy_operator_proxy_evictions_total')).toContain(
      'proxy_operator_proxy_evictions_total{provider="local",cause="timeout"} 1',
    );
    expect(await registry.getSingleMetricAsString('proxy_operator_proxy_ready_to_evicted_seconds')).toContain(
      'proxy_operator_proxy_ready_to_evicted_seconds_count{provider="local"} 1',
    );

    // Still paused: reconcile's probe fails too and it stays out.
    expect((await reconcileProxy('p', reconcileDeps(), signal)).kind).toBe('retry-later');
    forward.resume();
    // The same instance comes back only after two passes in a row.
    expect(await reconcileProxy('p', reconcileDeps(), signal)).toEqual({
      kind: 'retry-later',
      why: 'readiness probe passed (1 of 2 in a row needed to return)',
    });
    expect((await discover()).names).toEqual([]);
    expect((await reconcileProxy('p', reconcileDeps(), signal)).kind).toBe('ready');
    expect((await discover()).names).toEqual(['p']);
  });

  test('a proxy that refuses connections leaves discovery with cause refused', async () => {
    const signal = AbortSignal.timeout(30_000);
    expect((await reconcileProxy('p', reconcileDeps(), signal)).kind).toBe('ready');
    const l = startLoop();
    await nextProbe(l, (e) => e.verdict.ok);
    await forward.close();
    const evicted = await nextProbe(l, (e) => e.outcome === 'evicted');
    expect(evicted.verdict).toMatchObject({ ok: false, cause: 'refused' });
    expect((await discover()).names).toEqual([]);
    expect(await registry.getSingleMetricAsString('proxy_operator_proxy_evictions_total')).toContain('cause="refused"} 1');
  });

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

  test('with --probe-failures 2 one failed probe is counted and the proxy stays in discovery', async () => {
    const signal = AbortSignal.timeout(30_000);
    expect((await reconcileProxy('p', reconcileDeps(), signal)).kind).toBe('ready');
    const l = startLoop(2);
    await nextProbe(l, (e) => e.verdict.ok);
    forward.pause();
    const counted = await nextProbe(l, (e) => e.outcome !== undefined);
    forward.resume();
    expect(counted.outcome).toBe('counted');
    expect((await store.get('p'))?.status).toMatchObject({ phase: 'Ready', probeFailures: 1 });
    expect((await discover()).names).toEqual(['p']);
    // The next pass clears the count.
    await nextProbe(l, (e) => e.verdict.ok);
    expect((await store.get('p'))?.status.probeFailures).toBe(0);
    expect(work.proxyReconciles()).toEqual([]);
  });
});
