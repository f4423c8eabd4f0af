import { once } from 'node:events';
import type { Server as HttpServer } from 'node:http';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { proxyRoutes } from '../../src/api/routes/proxies.ts';
import { silentLogger } from '../../src/logging.ts';
import { createReconcileMetrics } from '../../src/metrics/proxy-metrics.ts';
import type { ReadinessPolicy } from '../../src/proxies/readiness-contract.ts';
import { reconcileProxy, type ReconcileDeps } from '../../src/proxies/reconcile.ts';
import { MemoryProbeClaims } from '../../src/readiness/probe-claims.ts';
import { ProbeLoop } from '../../src/readiness/probe-loop.ts';
import { reconcileProbe } from '../../src/readiness/reconcile-probe.ts';
import { MemoryProxyStore } from '../../src/store/memory-proxy-store.ts';
import { MemoryWorkRequests } from '../../src/work/memory-work-requests.ts';
import { startPausableProxy, type PausableProxy } from '../support/pausable-proxy.ts';
import { lifecycleFor, nextProbe, startEcho } from '../support/probe-loop-fixtures.ts';

/**
 * The eviction rule end to end on real parts: a real forward proxy that the test pauses (it keeps
 * accepting connections and answers nothing, like a SIGSTOPped process), the real probe through it
 * to a real echo endpoint, the probe loop, the store and the discovery route with its ETag. No
 * Redis: the store, the work requests and the probe claims are in memory (claims shared with other
 * workers in Redis are test/readiness/probe-claims.test.ts).
 */

describe('eviction on the first failed probe', () => {
  let store: MemoryProxyStore;
  // The work-requests port in memory: the reconciles an eviction asks for, with no queue.
  let work: MemoryWorkRequests;
  let echo: { server: HttpServer; url: string };
  let forward: PausableProxy;
  let loop: ProbeLoop | undefined;
  let registry: Registry;
  const policy: ReadinessPolicy = { failureThreshold: 1, successThreshold: 2, replaceAfterMs: 300_000 };

  beforeAll(async () => {
    echo = await startEcho();
  });
  afterAll(async () => {
    echo.server.closeAllConnections();
    await new Promise((resolve) => echo.server.close(resolve));
  });
  beforeEach(async () => {
    store = new MemoryProxyStore();
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
      claims: new MemoryProbeClaims(),
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
