/**
 * The watch on Proxy and ProxyPool objects (`--store kubernetes`), against the fake kube-apiserver with
 * the generated CRDs: which changes ask for a reconcile of a proxy or a pool, resuming from the last
 * resourceVersion, relisting on 410 Gone, backing off on errors, and stopping on its signal.
 */
import { once } from 'node:events';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { redisOptions } from '../../queues/connection.ts';
import { QUEUES } from '../../queues/names.ts';
import { SchedulerRole } from '../../src/scheduler/scheduler-role.ts';
import { RedisStatusStore } from '../../src/store/redis-status-store.ts';
import { testConfig } from '../support/config.ts';
import { proxyCrd, proxyPoolCrd } from '../../src/crds/definitions.ts';
import { POOL_LABEL, poolDocumentSchema } from '../../src/model/pool-resource.ts';
import { KubernetesPoolStore } from '../../src/store/kubernetes/pool-store.ts';
import { createLogger } from '../../src/logging.ts';
import { KubernetesProxyStore } from '../../src/store/kubernetes/proxy-store.ts';
import { ProxyWatch } from '../../src/store/kubernetes/proxy-watch.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { waitFor } from '../support/wait.ts';

const PATH = '/apis/egress-proxies.io/v1alpha1/namespaces/default/proxies';
const logger = createLogger({ level: 'silent' });

let fake: FakeKubeApiserver;
let store: KubernetesProxyStore;
let crs: CustomObjectsApi;
let stop: AbortController;
let running: Promise<void>;
let changes: string[];
let poolChanges: string[];

function startWatch(options: ConstructorParameters<typeof ProxyWatch>[3] = {}, withPools = false): void {
  changes = [];
  poolChanges = [];
  stop = new AbortController();
  running = new ProxyWatch(fake.kubeConfig(), 'default', logger, { baseBackoffMs: 20, maxBackoffMs: 200, ...options }).run(
    (name) => changes.push(name),
    stop.signal,
    withPools ? (pool) => poolChanges.push(pool) : undefined,
  );
}

const poolSeen = (name: string, times = 1): Promise<true> =>
  waitFor(
    `${times} change(s) of pool ${name} (saw ${JSON.stringify(poolChanges)})`,
    () => poolChanges.filter((c) => c === name).length >= times || undefined,
    10_000,
  );

const seen = (name: string, times = 1): Promise<true> =>
  waitFor(`${times} change(s) of ${name} (saw ${JSON.stringify(changes)})`, () => changes.filter((c) => c === name).length >= times || undefined, 10_000);

const watches = (): { resourceVersion: string | undefined }[] =>
  fake.requests.filter((r) => r.path === PATH && r.query.watch === 'true').map((r) => ({ resourceVersion: r.query.resourceVersion }));
const lists = (): number => fake.requests.filter((r) => r.path === PATH && r.method === 'GET' && r.query.watch !== 'true').length;

beforeEach(async () => {
  fake = await startFakeKubeApiserver();
  fake.registerCrd(proxyCrd());
  fake.registerCrd(proxyPoolCrd());
  store = new KubernetesProxyStore(fake.kubeConfig(), 'default');
  crs = fake.kubeConfig().makeApiClient(CustomObjectsApi);
});
afterEach(async () => {
  stop.abort();
  await running;
  await fake.close();
});

describe('ProxyWatch', () => {
  it('reports proxies at the first list, then each add, spec change, deletion request and removal; not status or label writes', async () => {
    await store.apply({ metadata: { name: 'before', labels: {} }, spec: { provider: 'local' } });
    startWatch();
    await seen('before');
    await waitFor('the watch', () => watches().length > 0 || undefined);

    await crs.createNamespacedCustomObject({
      group: 'egress-proxies.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'proxies',
      body: { apiVersion: 'egress-proxies.io/v1alpha1', kind: 'Proxy', metadata: { name: 'by-hand' }, spec: { provider: 'local' } },
    });
    await seen('by-hand');
    await store.updateStatus('before', (p) => ({ ...p.status, phase: 'Ready' }));
    await store.apply({ metadata: { name: 'before', labels: { team: 'x' } }, spec: { provider: 'local' } });
    await store.apply({ metadata: { name: 'before', labels: { team: 'x' } }, spec: { provider: 'gce' } });
    await seen('before', 2);
    await store.requestDeletion('before');
    await seen('before', 3);
    await store.remove('before');
    await seen('before', 4);
    // The status write and the label change asked for nothing: four reports of `before` in all.
    await store.apply({ metadata: { name: 'marker', labels: {} }, spec: { provider: 'local' } });
    await seen('marker');
    expect(changes.filter((c) => c === 'before')).toHaveLength(4);
  });

  it('resumes each new watch from the last resourceVersion it saw', async () => {
    startWatch({ timeoutSeconds: 1 });
    await waitFor('the watch', () => watches().length > 0 || undefined);
    await store.apply({ metadata: { name: 'web', labels: {} }, spec: { provider: 'local' } });
    await seen('web');
    const rv = (fake.getObject('egress-proxies.io', 'v1alpha1', 'proxies', 'default', 'web') as { metadata: { resourceVersion: string } } | undefined)?.metadata
      .resourceVersion;
    await waitFor(
      'a watch resumed from the last resourceVersion',
      () =>
        watches()
          .slice(1)
          .some((w) => w.resourceVersion === rv) || undefined,
    );
    expect(lists()).toBe(1);
  });

  it('lists again on 410 Gone and reports what changed meanwhile', async () => {
    await store.apply({ metadata: { name: 'a', labels: {} }, spec: { provider: 'local' } });
    startWatch({ timeoutSeconds: 1 });
    await seen('a');
    await waitFor('the watch', () => watches().length > 0 || undefined);
    // The next watch request waits while the event log moves past its resourceVersion.
    fake.setEventLogSize(1);
    fake.injectFault({ match: { method: 'GET', path: PATH }, latencyMs: 1500 });
    await waitFor('the delayed re-watch', () => fake.requests.filter((r) => r.path === PATH && r.outcome === 'pending').length > 0 || undefined);
    await store.apply({ metadata: { name: 'b', labels: {} }, spec: { provider: 'local' } });
    await store.apply({ metadata: { name: 'c', labels: {} }, spec: { provider: 'local' } });
    await store.apply({ metadata: { name: 'a', labels: {} }, spec: { provider: 'gce' } });
    await seen('b');
    await seen('c');
    await seen('a', 2);
    expect(lists()).toBe(2);
  });

  it('backs off and tries again when the API server fails, and stops when its signal ends', async () => {
    fake.injectFault({ match: { method: 'GET', path: PATH }, status: 500 });
    fake.injectFault({ match: { method: 'GET', path: PATH }, status: 503 });
    await store.apply({ metadata: { name: 'web', labels: {} }, spec: { provider: 'local' } });
    startWatch();
    await seen('web');
    expect(lists()).toBe(3);
    stop.abort();
    await running;
  });
});

describe('ProxyWatch with pools', () => {
  const POOLS = '/apis/egress-proxies.io/v1alpha1/namespaces/default/proxypools';
  const pool = (name: string, replicas = 2) =>
    poolDocumentSchema.parse({ kind: 'ProxyPool', metadata: { name }, spec: { replicas, template: { spec: { provider: 'local' } } } });
  const member = (name: string, of: string) => ({ metadata: { name, labels: { [POOL_LABEL]: of } }, spec: { provider: 'local' } });

  it('reports pools at the first list, then each add, spec change, deletion request and removal; not status or label writes', async () => {
    const pools = new KubernetesPoolStore(fake.kubeConfig(), 'default');
    await pools.apply(pool('before'));
    startWatch({}, true);
    await poolSeen('before');
    await waitFor('the pool watch', () => fake.requests.some((r) => r.path === POOLS && r.query.watch === 'true') || undefined);
    await crs.createNamespacedCustomObject({
      group: 'egress-proxies.io',
      version: 'v1alpha1',
      namespace: 'default',
      plural: 'proxypools',
      body: {
        apiVersion: 'egress-proxies.io/v1alpha1',
        kind: 'ProxyPool',
        metadata: { name: 'by-hand' },
        spec: { replicas: 1, template: { spec: { provider: 'local' } } },
      },
    });
    await poolSeen('by-hand');
    await pools.updateStatus('before', (p) => ({ ...p.status, desired: 2 }));
    await pools.apply({ ...pool('before'), metadata: { name: 'before', labels: { team: 'x' } } });
    await pools.apply({ ...pool('before', 3), metadata: { name: 'before', labels: { team: 'x' } } });
    await poolSeen('before', 2);
    await pools.requestDeletion('before');
    await poolSeen('before', 3);
    await pools.remove('before');
    await poolSeen('before', 4);
    await pools.apply(pool('marker'));
    await poolSeen('marker');
    expect(poolChanges.filter((c) => c === 'before')).toHaveLength(4);
    // Pools are not proxies: the proxy callback heard of none of them.
    expect(changes).toEqual([]);
  });

  it('reports a member’s pool when the member is added, changes phase, moves to another pool, or goes; not on other status writes', async () => {
    startWatch({}, true);
    await waitFor('the proxy watch', () => watches().length > 0 || undefined);
    await store.apply(member('m1', 'crawl'));
    await seen('m1');
    await poolSeen('crawl');
    await store.updateStatus('m1', (p) => ({ ...p.status, phase: 'Ready', url: 'http://127.0.0.1:1' }));
    await poolSeen('crawl', 2);
    // The same phase again (a probe's write): nothing for the pool.
    await store.updateStatus('m1', (p) => ({ ...p.status, url: 'http://127.0.0.1:2' }));
    await store.apply(member('m1', 'other'));
    await poolSeen('other');
    await poolSeen('crawl', 3);
    await store.requestDeletion('m1');
    await poolSeen('other', 2);
    await store.remove('m1');
    await poolSeen('other', 3);
    // A proxy of no pool reports no pool; the marker shows the watch got past the writes above.
    await store.apply({ metadata: { name: 'loner', labels: {} }, spec: { provider: 'local' } });
    await store.apply(member('marker', 'last'));
    await poolSeen('last');
    expect(poolChanges.filter((c) => c === 'crawl')).toHaveLength(3);
    expect(poolChanges.filter((c) => c === 'other')).toHaveLength(3);
    expect([...new Set(poolChanges)].sort()).toEqual(['crawl', 'last', 'other']);
  });

  it('keeps watching Proxies while the ProxyPool watch fails (the CRD not installed yet)', async () => {
    for (let i = 0; i < 3; i++) fake.injectFault({ match: { method: 'GET', path: POOLS }, status: 404 });
    startWatch({}, true);
    await store.apply({ metadata: { name: 'web', labels: {} }, spec: { provider: 'local' } });
    await seen('web');
    await waitFor('the ProxyPool list to fail twice', () => fake.requests.filter((r) => r.path === POOLS && r.status === 404).length >= 2 || undefined);
    expect(poolChanges).toEqual([]);
  });
});

describe('the leading scheduler runs the watch', () => {
  it('enqueues a pool reconcile for a pool applied with kubectl and for its member’s changes, and a proxy reconcile for the member', async () => {
    const config = testConfig();
    const redis = new Redis(inject('redisUrl'));
    const store = new RedisStatusStore(redis, config.redis.prefix);
    const reconcile = new Queue(QUEUES.reconcile, { connection: redisOptions(inject('redisUrl'), 'worker'), prefix: config.redis.prefix });
    const role = new SchedulerRole({
      config,
      redisTarget: inject('redisUrl'),
      redis,
      store,
      logger,
      proxyChanges: new ProxyWatch(fake.kubeConfig(), 'default', logger, { baseBackoffMs: 20, maxBackoffMs: 200 }),
    });
    // The suite's afterEach stops a watch of its own: give it one that has ended.
    stop = new AbortController();
    running = Promise.resolve();
    try {
      const leading = once(role, 'leading');
      role.start();
      await leading;
      await crs.createNamespacedCustomObject({
        group: 'egress-proxies.io',
        version: 'v1alpha1',
        namespace: 'default',
        plural: 'proxypools',
        body: {
          apiVersion: 'egress-proxies.io/v1alpha1',
          kind: 'ProxyPool',
          metadata: { name: 'crawl' },
          spec: { replicas: 1, template: { spec: { provider: 'local' } } },
        },
      });
      const jobs = async () => (await reconcile.getJobs(['waiting', 'delayed', 'prioritized'])).map((j) => `${j.name} ${JSON.stringify(j.data)}`);
      await waitFor('a pool reconcile of crawl', async () => (await jobs()).includes('pool-reconcile {"pool":"crawl"}') || undefined, 10_000);
      await reconcile.obliterate({ force: true });
      await new KubernetesProxyStore(fake.kubeConfig(), 'default').apply({
        metadata: { name: 'crawl-abcde', labels: { [POOL_LABEL]: 'crawl' } },
        spec: { provider: 'local' },
      });
      await waitFor(
        'a proxy reconcile of the member and a pool reconcile of its pool',
        async () => {
          const now = await jobs();
          return (now.includes('pool-reconcile {"pool":"crawl"}') && now.some((j) => j.startsWith('reconcile ') && j.includes('crawl-abcde'))) || undefined;
        },
        10_000,
      );
    } finally {
      await role.close();
      await reconcile.obliterate({ force: true });
      await reconcile.close();
      await store.close();
      await redis.quit();
    }
  });
});
