/**
 * The install gives the publisher only `providerhealths/status`: it cannot create ProviderHealth
 * objects. The leading scheduler makes them (ensureProviderHealth); until it has, the publisher's
 * write fails with a retryable error (the results job is retried), and afterwards it succeeds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerHealthCrd } from '../../src/crds/definitions.ts';
import { retryVerdict } from '../../queues/retry.ts';
import type { ProviderHealth } from '../../src/health/provider-health.ts';
import { KubernetesStatusStore } from '../../src/store/kubernetes/status-store.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';

const T0 = '2026-11-01T10:00:00.000Z';
const health: ProviderHealth = { name: 'local', status: { ready: true, lastTransitionTime: T0, lastCheckTime: T0, targets: [] } };

describe('ProviderHealth with a publisher that may write only status', () => {
  let fake: FakeKubeApiserver;
  beforeAll(async () => {
    fake = await startFakeKubeApiserver({
      tokens: { 'fake-token': 'system:serviceaccount:egress:scheduler', 'publisher-token': 'system:serviceaccount:egress:publisher' },
    });
    fake.registerCrd(providerHealthCrd());
    fake.forbid('publisher-token', ['create', 'delete'], ['providerhealths']);
  });
  afterAll(() => fake.close());

  it('fails retryably before the scheduler made the object, and writes its status after', async () => {
    const publisher = new KubernetesStatusStore(fake.kubeConfig('publisher-token'));
    const scheduler = new KubernetesStatusStore(fake.kubeConfig());
    const early = await publisher.updateProviderHealth('local', () => health).catch((err: unknown) => err);
    expect(early).toMatchObject({ code: 'ERR_KUBERNETES_STORE', status: 403 });
    expect(retryVerdict(early)).toEqual({ kind: 'retry' });
    expect(await scheduler.getProviderHealth('local')).toBeUndefined();

    await scheduler.ensureProviderHealth(['local']);
    await scheduler.ensureProviderHealth(['local']);
    expect(await scheduler.getProviderHealth('local')).toBeUndefined();
    expect(await publisher.updateProviderHealth('local', () => health)).toEqual(health);
    expect(await scheduler.getProviderHealth('local')).toEqual(health);
  });
});
