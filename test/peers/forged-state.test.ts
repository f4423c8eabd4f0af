/**
 * With `--store kubernetes`, anyone who may write the custom resources is a peer: a forged or broken
 * spec or status read back from the API server must neither steer the fleet nor crash a role. The
 * fake kube-apiserver serves the real CRDs (forged times pass them) or, for shapes they refuse, the
 * same kinds under a CRD that keeps any spec and status (one installed by hand, or a server that does
 * not enforce the schema); the real client, stores, publisher, reconciles and gauges read them.
 */
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { API_GROUP, API_VERSION, GROUP_VERSION } from '../../src/crds/resources.ts';
import { providerHealthCrd, proxyCrd, proxyPoolCrd, type CustomResourceDefinition } from '../../src/crds/definitions.ts';
import { MemoryEventStore } from '../../src/events/memory-event-store.ts';
import { silentLogger } from '../../src/logging.ts';
import { registerPoolGauges } from '../../src/metrics/pool-gauges.ts';
import { POOL_LABEL } from '../../src/model/pool-resource.ts';
import { RedisMemberReplacements } from '../../src/pools/member-replacements.ts';
import { reconcilePool, type PoolReconcileDeps } from '../../src/pools/reconcile-pool.ts';
import { sweepProvider } from '../../src/proxies/gc.ts';
import { reconcileProxy, type ReconcileDeps } from '../../src/proxies/reconcile.ts';
import { KubernetesPoolStore } from '../../src/store/kubernetes/pool-store.ts';
import { KubernetesProxyStore } from '../../src/store/kubernetes/proxy-store.ts';
import { MAX_CLOCK_SKEW_MS } from '../../src/store/kubernetes/read-back.ts';
import { KubernetesStatusStore } from '../../src/store/kubernetes/status-store.ts';
import { publishResults } from '../../workers/publisher-role.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { uniquePrefix } from '../support/config.ts';
import { RecordingLifecycle } from '../support/recording-lifecycle.ts';
import type { CheckResultData } from '../../src/health/check-result.ts';

const signal = AbortSignal.timeout(60_000);
const FORGED = '2099-01-01T00:00:00.000Z';

let kube: FakeKubeApiserver;

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
});
afterEach(async () => {
  await kube.close();
});

/** The CRD with its spec and status schemas replaced by "keep anything": what a hand-made CRD or a lax server lets through. */
function laxCrd(crd: CustomResourceDefinition): CustomResourceDefinition {
  const lax = structuredClone(crd) as { spec: { versions: { schema: { openAPIV3Schema: { properties: Record<string, unknown> } } }[] } };
  for (const version of lax.spec.versions) {
    const props = version.schema.openAPIV3Schema.properties;
    props.spec = { 'x-kubernetes-preserve-unknown-fields': true };
    props.status = { 'x-kubernetes-preserve-unknown-fields': true };
  }
  return lax;
}

/** Writes an object's status as a PUT on `/status` would, bypassing our stores (a peer with write access). */
function forgeStatus(plural: string, namespace: string | undefined, name: string, status: unknown): void {
  kube.updateObject(API_GROUP, API_VERSION, plural, namespace, name, (o) => void (o.status = status), 'status');
}

function statusOf(plural: string, namespace: string | undefined, name: string): Record<string, unknown> {
  return (kube.getObject(API_GROUP, API_VERSION, plural, namespace, name)?.status ?? {}) as Record<string, unknown>;
}

describe('a ProviderHealth whose status a peer forged', () => {
  const failing = (provider: string, checkedAt: string): CheckResultData => ({
    provider,
    checkJobId: `check-${provider}-${checkedAt}`,
    checkedAt,
    targets: [{ target: 'localhost', ready: false, reason: 'Error', message: 'disk full', details: {}, durationSeconds: 0.01 }],
  });
  const target = (ready: boolean, lastTransitionTime: string, lastCheckTime: string) => ({
    name: 'localhost',
    ready,
    reason: ready ? 'Ok' : 'Error',
    message: ready ? 'forged' : 'disk full',
    lastTransitionTime,
    lastCheckTime,
    durationSeconds: 0,
    details: {},
  });
  const publish = (store: KubernetesStatusStore, results: CheckResultData[]) =>
    publishResults(results, { store, configured: new Set(['local', 'peer']), now: () => new Date(), logger: silentLogger() }, signal);

  it('records the next failing check over a forged ready=true whose lastCheckTime lies in the future', async () => {
    kube.registerCrd(providerHealthCrd());
    const store = new KubernetesStatusStore(kube.kubeConfig());
    await store.ensureProviderHealth(['local', 'peer'], signal);
    // The real CRD accepts this: well-formed date-times, only forged.
    forgeStatus('providerhealths', undefined, 'local', {
      ready: true,
      lastTransitionTime: FORGED,
      lastCheckTime: FORGED,
      targetsReady: '1/1',
      targets: [target(true, FORGED, FORGED)],
    });
    // Beside it, a status another publisher wrote with a clock running ahead, within the skew: trusted as it is.
    const ahead = new Date(Date.now() + MAX_CLOCK_SKEW_MS / 2).toISOString();
    const since = new Date(Date.now() - 60_000).toISOString();
    forgeStatus('providerhealths', undefined, 'peer', {
      ready: false,
      lastTransitionTime: since,
      lastCheckTime: ahead,
      targets: [target(false, since, ahead)],
    });
    const checkedAt = new Date(Date.now() - 1_000).toISOString();

    await publish(store, [failing('local', checkedAt), failing('peer', checkedAt)]);

    const local = statusOf('providerhealths', undefined, 'local');
    expect(local).toMatchObject({ ready: false, lastTransitionTime: checkedAt, lastCheckTime: checkedAt, targetsReady: '0/1' });
    expect(local.targets).toEqual([{ ...target(false, checkedAt, checkedAt), durationSeconds: 0.01 }]);
    expect((await store.getProviderHealth('local', signal))?.status.ready).toBe(false);
    // No flip, so no new lastTransitionTime; the target's time is kept, as an older result leaves it.
    expect(statusOf('providerhealths', undefined, 'peer')).toMatchObject({ ready: false, lastTransitionTime: since, targets: [target(false, since, ahead)] });
  });

  it('records a check over a status whose targets are not a list (no TypeError)', async () => {
    kube.registerCrd(laxCrd(providerHealthCrd()));
    const store = new KubernetesStatusStore(kube.kubeConfig());
    await store.ensureProviderHealth(['local'], signal);
    forgeStatus('providerhealths', undefined, 'local', { ready: true, lastTransitionTime: FORGED, lastCheckTime: 'yesterday', targets: 'x' });
    const checkedAt = new Date(Date.now() - 1_000).toISOString();

    await expect(store.listProviderHealth(signal)).resolves.toEqual([]);
    await publish(store, [failing('local', checkedAt)]);

    expect(statusOf('providerhealths', undefined, 'local')).toMatchObject({ ready: false, lastTransitionTime: checkedAt, targetsReady: '0/1' });
  });
});

describe('Proxies whose spec or status a peer wrote around the API', () => {
  let lifecycle: RecordingLifecycle;
  let events: MemoryEventStore;
  let store: KubernetesProxyStore;

  beforeEach(() => {
    kube.registerCrd(laxCrd(proxyCrd()));
    lifecycle = new RecordingLifecycle();
    events = new MemoryEventStore({ maxCount: 1_000, maxAgeMs: 3_600_000 });
    store = new KubernetesProxyStore(kube.kubeConfig(), 'default');
  });

  const deps = (): ReconcileDeps => ({
    proxies: store,
    lifecycles: new Map([['local', lifecycle]]),
    fleet: 'test',
    probe: async () => ({ ok: true, egressIp: '127.0.0.1' }),
    events: events.sink('worker'),
  });
  const seed = (name: string, spec: unknown): void =>
    void kube.seedObject(API_GROUP, API_VERSION, 'proxies', { apiVersion: GROUP_VERSION, kind: 'Proxy', metadata: { name }, spec });

  it('fails each malformed spec in its own reconcile, naming the object and the field, and reconciles the good one', async () => {
    seed('web-1', { provider: 'local', placement: { zone: 'europe-west1-b' } });
    seed('web-2', { provider: 7 });
    seed('web-3', { provider: 'local' });

    // Every proxy is listed (GC and discovery read the list): the bad ones with what is wrong.
    const listed = await store.list(signal);
    expect(listed.map((p) => [p.name, p.specProblems])).toEqual([
      ['web-1', ['spec.placement: expected a string, got an object']],
      ['web-2', ['spec.provider: expected a string, got 7']],
      ['web-3', undefined],
    ]);

    const outcomes = [];
    for (const name of ['web-1', 'web-2', 'web-3']) outcomes.push(await reconcileProxy(name, deps(), signal));

    expect(outcomes).toEqual([
      { kind: 'failed', message: 'Proxy "web-1": spec.placement: expected a string, got an object' },
      { kind: 'failed', message: 'Proxy "web-2": spec.provider: expected a string, got 7' },
      { kind: 'ready', url: 'http://127.0.0.1:3001' },
    ]);
    // Nothing malformed reached the lifecycle: one instance, the good proxy's, at no placement.
    expect([...lifecycle.instances.keys()]).toEqual([expect.stringMatching(/^\/ep-web-3-/)]);
    expect(statusOf('proxies', 'default', 'web-1')).toMatchObject({
      phase: 'Failed',
      lastError: 'Proxy "web-1": spec.placement: expected a string, got an object',
      conditions: [{ type: 'Ready', status: 'False', reason: 'Failed', message: 'Proxy "web-1": spec.placement: expected a string, got an object' }],
    });
    expect(statusOf('proxies', 'default', 'web-2')).toMatchObject({ phase: 'Failed', lastError: 'Proxy "web-2": spec.provider: expected a string, got 7' });
    expect(statusOf('proxies', 'default', 'web-3')).toMatchObject({ phase: 'Ready', url: 'http://127.0.0.1:3001' });
    const failed = await events.list({ reason: 'Failed', limit: 10 });
    expect(failed.map((e) => [e.object.name, e.type, e.message])).toEqual([
      ['web-1', 'Warning', 'Proxy "web-1": spec.placement: expected a string, got an object'],
      ['web-2', 'Warning', 'Proxy "web-2": spec.provider: expected a string, got 7'],
    ]);
  });

  it('reads a status whose conditions are not a list, or that is not an object, as Pending, and reconciles the proxy', async () => {
    seed('odd-conditions', { provider: 'local' });
    seed('odd-status', { provider: 'local' });
    forgeStatus('proxies', 'default', 'odd-conditions', { phase: 'Ready', url: 'http://203.0.113.9:3128', conditions: 'x', observedGeneration: 1 });
    forgeStatus('proxies', 'default', 'odd-status', 5);

    for (const name of ['odd-conditions', 'odd-status']) {
      const before = await store.get(name, signal);
      expect(before?.status).toEqual({ phase: 'Pending', conditions: [], observedGeneration: 0 });
      await expect(reconcileProxy(name, deps(), signal)).resolves.toMatchObject({ kind: 'ready' });
      const after = statusOf('proxies', 'default', name);
      expect(after).toMatchObject({
        phase: 'Ready',
        conditions: [{ type: 'Ready', status: 'True' }],
        credentialsSecretRef: { name: `${name}-proxy-credentials` },
      });
      expect(after.url).not.toBe('http://203.0.113.9:3128');
    }
  });
  it('keeps the instance of a Proxy whose spec turned malformed from GC, and still deletes it from where it was made', async () => {
    await store.apply({ metadata: { name: 'web', labels: {} }, spec: { provider: 'local' } }, signal);
    await expect(reconcileProxy('web', deps(), signal)).resolves.toMatchObject({ kind: 'ready' });
    const [instance] = lifecycle.instances.values();
    kube.updateObject(API_GROUP, API_VERSION, 'proxies', 'default', 'web', (o) => void (o.spec = { provider: 7 }));

    // The provider the spec names cannot be read: the instance is the proxy's on whichever provider holds it.
    const swept = await sweepProvider('local', lifecycle, { proxies: store, fleet: 'test', graceMs: 0, logger: silentLogger() }, signal);
    expect(swept).toMatchObject({ seen: 1, kept: 1, deleted: [] });
    await expect(reconcileProxy('web', deps(), signal)).resolves.toEqual({ kind: 'failed', message: 'Proxy "web": spec.provider: expected a string, got 7' });
    expect([...lifecycle.instances.values()]).toEqual([instance]);

    await store.requestDeletion('web', {}, signal);
    await expect(reconcileProxy('web', deps(), signal)).resolves.toEqual({ kind: 'deleted' });
    expect(lifecycle.instances.size).toBe(0);
    expect(await store.get('web', signal)).toBeUndefined();
  });
});

describe('ProxyPools whose spec or status a peer wrote around the API', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    await redis.quit();
  });

  const poolDeps = (pools: KubernetesPoolStore, proxies: KubernetesProxyStore, now: () => Date = () => new Date()): PoolReconcileDeps => ({
    pools,
    proxies,
    replacements: new RedisMemberReplacements(redis, uniquePrefix(), now),
    requestReconcile: async () => undefined,
    failedReplaceAfterMs: 60_000,
    now,
  });
  const seedPool = (name: string, spec: unknown): void =>
    void kube.seedObject(API_GROUP, API_VERSION, 'proxypools', { apiVersion: GROUP_VERSION, kind: 'ProxyPool', metadata: { name }, spec });

  it('makes no members for a malformed spec, says why in its status, and keeps the good pool and /metrics working', async () => {
    kube.registerCrd(laxCrd(proxyPoolCrd()));
    kube.registerCrd(proxyCrd());
    const pools = new KubernetesPoolStore(kube.kubeConfig(), 'default');
    const proxies = new KubernetesProxyStore(kube.kubeConfig(), 'default');
    seedPool('bad', { replicas: 'three', template: { spec: { provider: 'local' } } });
    forgeStatus('proxypools', 'default', 'bad', { desired: 3, current: 0, ready: 0, rotating: 0, failed: 0, conditions: 'x', observedGeneration: 1 });
    seedPool('good', { replicas: 2, template: { spec: { provider: 'local' } } });
    const registry = new Registry();
    registerPoolGauges(registry, pools);

    const bad = await reconcilePool('bad', poolDeps(pools, proxies), signal);
    const good = await reconcilePool('good', poolDeps(pools, proxies), signal);

    const why = 'invalid spec, no members made: spec.replicas: expected a number, got "three"';
    expect(bad).toEqual({ kind: 'invalid', message: why });
    expect(statusOf('proxypools', 'default', 'bad')).toMatchObject({
      desired: 0,
      lastError: why,
      conditions: [{ type: 'Ready', status: 'False', reason: 'InvalidSpec', message: why }],
    });
    expect(good).toMatchObject({ kind: 'reconciled', created: [expect.stringMatching(/^good-/), expect.stringMatching(/^good-/)] });
    expect((await proxies.list(signal)).map((p) => p.labels[POOL_LABEL])).toEqual(['good', 'good']);
    const metrics = await registry.metrics();
    expect(metrics).toContain('proxy_operator_pool_members{pool="bad",state="desired"} 0');
    expect(metrics).toContain('proxy_operator_pool_members{pool="good",state="desired"} 2');
  });

  it('replaces a Failed member whose Ready condition claims a flip in the future, once it is due from now', async () => {
    kube.registerCrd(proxyPoolCrd());
    kube.registerCrd(proxyCrd());
    // The stores read at `read`; the pool reconcile runs two minutes later (failedReplaceAfterMs is one).
    const read = new Date('2026-11-01T10:00:00.000Z');
    const later = new Date(read.getTime() + 120_000);
    const pools = new KubernetesPoolStore(kube.kubeConfig(), 'default', { now: () => read });
    const proxies = new KubernetesProxyStore(kube.kubeConfig(), 'default', { now: () => read });
    await pools.apply({
      kind: 'ProxyPool',
      metadata: { name: 'crawl', labels: {} },
      spec: { replicas: 1, template: { metadata: { labels: {} }, spec: { provider: 'local' } }, maxSurge: 1 },
    });
    await proxies.apply({ metadata: { name: 'crawl-aaaaa', labels: { [POOL_LABEL]: 'crawl' } }, spec: { provider: 'local' } });
    forgeStatus('proxies', 'default', 'crawl-aaaaa', {
      phase: 'Failed',
      lastError: 'quota exceeded',
      conditions: [{ type: 'Ready', status: 'False', reason: 'Failed', message: 'quota exceeded', lastTransitionTime: FORGED }],
      observedGeneration: 1,
      credentialsSecretRef: { name: 'crawl-aaaaa-proxy-credentials' },
    });

    const outcome = await reconcilePool(
      'crawl',
      poolDeps(pools, proxies, () => later),
      signal,
    );

    // The flip read back is clamped to the read: Failed since then, so due for replacement now.
    expect(outcome).toMatchObject({ kind: 'reconciled', deleted: ['crawl-aaaaa'], created: [expect.stringMatching(/^crawl-/)] });
    expect((await proxies.get('crawl-aaaaa', signal))?.status.conditions[0]?.lastTransitionTime).toBe(read.toISOString());
  });
});
