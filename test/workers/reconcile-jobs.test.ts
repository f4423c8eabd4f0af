import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Job, Queue } from 'bullmq';
import { OAuth2Client } from 'google-auth-library';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, inject, test } from 'vitest';
import type { Consumer } from '../../queues/consume.ts';
import { QUEUES } from '../../queues/names.ts';
import type { AppConfig } from '../../src/config/app.ts';
import { silentLogger } from '../../src/logging.ts';
import { createJobMetrics } from '../../src/metrics/job-metrics.ts';
import { createReconcileMetrics } from '../../src/metrics/proxy-metrics.ts';
import { createComputeClients } from '../../src/providers/gcp/index.ts';
import { createGcpLifecycle } from '../../src/providers/gcp/lifecycle.ts';
import { createKubernetesLifecycle } from '../../src/providers/kubernetes/lifecycle.ts';
import type { Instance, InstanceSpec, ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { fleetOf } from '../../src/proxies/instance-name.ts';
import type { ReadinessProbe } from '../../src/proxies/readiness-contract.ts';
import { BullmqWorkRequests } from '../../src/jobs/bullmq-work-requests.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import type { ProxyStore } from '../../src/store/proxy-store.ts';
import { consumeJobs, openJobQueue } from '../../workers/consumer.ts';
import { reconcileHandlers } from '../../workers/reconcile-processor.ts';
import { startFakeCompute } from '../fakes/compute/index.ts';
import { startFakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { testConfig } from '../support/config.ts';
import { waitFor } from '../support/wait.ts';

// Reconcile jobs through the real job boundary (consume, a real Redis) with real provider
// lifecycles on their fakes: what the errors say about retrying is what BullMQ does.

const okProbe: ReadinessProbe = async () => ({ ok: true, egressIp: '127.0.0.1' });

interface Harness {
  config: AppConfig;
  registry: Registry;
  queue: Queue;
  store: ProxyStore;
  /** The reconcile job of a proxy once it has failed or completed. */
  settled(proxy: string): Promise<Job>;
  close(): Promise<void>;
}

async function startHarness(provider: string, lifecycle: ProxyLifecycle): Promise<Harness> {
  const config = testConfig({ queues: ['reconcile'], dataDir: join(tmpdir(), 'reconcile-jobs-unused') });
  const registry = new Registry();
  const logger = silentLogger();
  const redis = new Redis(inject('redisUrl'));
  const store = new RedisProxyStore(redis, config.redis.prefix);
  const deps = { config, redisTarget: inject('redisUrl'), jobMetrics: createJobMetrics(registry), logger };
  const queue = openJobQueue(deps, QUEUES.reconcile);
  let consumer: Consumer | undefined;
  const close = async (): Promise<void> => {
    await consumer?.close();
    await queue.obliterate({ force: true });
    await queue.close();
    await store.close();
    redis.disconnect();
  };
  try {
    consumer = await consumeJobs(
      deps,
      new BullmqWorkRequests({ reconcile: queue }),
      QUEUES.reconcile,
      reconcileHandlers({
        proxies: store,
        metrics: createReconcileMetrics(registry),
        readiness: config.readiness,
        lifecycles: new Map([[provider, lifecycle]]),
        fleet: fleetOf(config.redis.prefix),
        probe: okProbe,
        logger,
        recheckMs: config.recheckMs,
      }),
      1,
    );
  } catch (err) {
    await close();
    throw err;
  }
  return {
    config,
    registry,
    queue,
    store,
    settled: (proxy) =>
      waitFor(`the reconcile job of ${proxy} settled`, async () => {
        const jobs = await queue.getJobs(['completed', 'failed']);
        return jobs.find((j) => (j.data as { proxy?: string }).proxy === proxy) ?? false;
      }),
    close,
  };
}

describe('a 403 fails its reconcile job once: a retry alone cannot get past it', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  test('kubernetes: RBAC refuses the Pod create', async () => {
    const kube = await startFakeKubeApiserver();
    cleanups.push(() => kube.close());
    kube.store.namespaces.add('proxies');
    kube.forbid(kube.token, ['create'], ['pods']);
    const h = await startHarness('k8s', createKubernetesLifecycle({ kubeConfig: kube.kubeConfig(), namespace: 'proxies', logger: silentLogger() }));
    cleanups.push(() => h.close());

    await h.store.apply({ metadata: { name: 'denied', labels: {} }, spec: { provider: 'k8s' } });
    await new BullmqWorkRequests({ reconcile: h.queue }).reconcileProxy('denied');
    const job = await h.settled('denied');
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toContain('cannot create resource "pods"');
    expect(kube.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/pods'))).toHaveLength(1);
  });

  test('gcp: IAM refuses the instance insert', async () => {
    const compute = await startFakeCompute({ project: 'egress-test', tokens: ['good-token'] });
    cleanups.push(() => compute.close());
    const auth = new OAuth2Client();
    auth.setCredentials({ access_token: 'good-token', expiry_date: Date.now() + 3_600_000 });
    const clients = createComputeClients({ ...compute.clientOptions(), authClient: auth });
    cleanups.push(() => clients.close());
    compute.injectFault({ status: 403, reason: 'forbidden', message: "Required 'compute.instances.create' permission", match: { method: 'POST' } });
    const lifecycle = createGcpLifecycle({
      clients,
      project: 'egress-test',
      zone: 'us-central1-a',
      image: 'projects/egress-images/global/images/family/forward-proxy',
      logger: silentLogger(),
      operationPollMs: 0,
    });
    const h = await startHarness('gce', lifecycle);
    cleanups.push(() => h.close());

    await h.store.apply({ metadata: { name: 'denied', labels: {} }, spec: { provider: 'gce' } });
    await new BullmqWorkRequests({ reconcile: h.queue }).reconcileProxy('denied');
    const job = await h.settled('denied');
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toContain('compute.instances.create');
    expect(compute.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/instances'))).toHaveLength(1);
  });
});

/** Instances in memory: created running, deleted at once. */
class MemoryLifecycle implements ProxyLifecycle {
  readonly instances = new Map<string, Instance>();
  async ensureInstance(spec: InstanceSpec): Promise<Instance> {
    const inst = this.instances.get(spec.name) ?? {
      name: spec.name,
      id: `id-${spec.name}`,
      state: 'running',
      owner: spec.owner,
      createdAt: new Date().toISOString(),
      endpoint: { host: '127.0.0.1', port: 3128 },
    };
    this.instances.set(spec.name, inst);
    return inst;
  }
  async getInstance(name: string): Promise<Instance | undefined> {
    return this.instances.get(name);
  }
  async deleteInstance(name: string): Promise<void> {
    this.instances.delete(name);
  }
  async *listInstances(): AsyncIterable<Instance> {
    yield* this.instances.values();
  }
}

describe('proxy_operator_reconciles_total', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  test('a reconcile that deletes the proxy is counted under its provider, though its record is gone afterwards', async () => {
    const started = await startHarness('mem', new MemoryLifecycle());
    h = started;
    await started.store.apply({ metadata: { name: 'short-lived', labels: {} }, spec: { provider: 'mem' } });
    await new BullmqWorkRequests({ reconcile: started.queue }).reconcileProxy('short-lived');
    await waitFor('the proxy Ready', async () => (await started.store.get('short-lived'))?.status.phase === 'Ready');
    await started.store.requestDeletion('short-lived');
    await new BullmqWorkRequests({ reconcile: started.queue }).reconcileProxy('short-lived');
    await waitFor('the proxy forgotten', async () => (await started.store.get('short-lived')) === undefined);
    const text = await waitFor('the deletion counted', async () => {
      const metrics = await started.registry.metrics();
      return metrics.includes('outcome="deleted"') ? metrics : false;
    });
    expect(text).toContain('proxy_operator_reconciles_total{provider="mem",outcome="ready"} 1');
    expect(text).toContain('proxy_operator_reconciles_total{provider="mem",outcome="deleted"} 1');
    expect(text).not.toContain('provider="unknown"');
  });
});
