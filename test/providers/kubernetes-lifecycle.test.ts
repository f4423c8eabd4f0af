import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { parseConfigDocument } from '../../src/config/file.ts';
import { silentLogger } from '../../src/logging.ts';
import { sweepProvider, type GcDeps } from '../../src/proxies/gc.ts';
import { ProvisioningError, type Instance, type InstanceSpec, type ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { MANAGED_LABELS } from '../../src/providers/kubernetes/index.ts';
import {
  createKubernetesLifecycle,
  FLEET_LABEL,
  KubernetesAccessError,
  KubernetesRequestError,
  PROXY_LABEL,
  type KubernetesLifecycleOptions,
} from '../../src/providers/kubernetes/lifecycle.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { podEnv } from '../fakes/kube-apiserver/kubelet.ts';
import { Registry } from 'prom-client';
import { egressGuards, proxyEgressPolicy, type ProxyEgressPolicy } from '../../src/egress/policy-config.ts';
import { createKubernetesProvider, kubernetesProviderSchema } from '../../src/providers/kubernetes/index.ts';

let kube: FakeKubeApiserver;

beforeEach(async () => {
  kube = await startFakeKubeApiserver();
  kube.store.namespaces.add('proxies');
});

afterEach(async () => {
  await kube.close();
});

const signal = () => new AbortController().signal;

function lifecycle(overrides: Partial<KubernetesLifecycleOptions> = {}): ProxyLifecycle {
  return createKubernetesLifecycle({ kubeConfig: kube.kubeConfig(), namespace: 'proxies', logger: silentLogger(), ...overrides });
}

function spec(name = 'ep-alpha-1234abcd', proxy = 'alpha', fleet = 'fleet-a'): InstanceSpec {
  return { name, owner: { fleet, proxy }, credentials: { username: 'u-alpha', password: 's3cret-pw' } };
}

const creates = () => kube.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/pods'));

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const decoded = (data: unknown): Record<string, string> =>
  Object.fromEntries(Object.entries((data ?? {}) as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));

async function collect(it: AsyncIterable<Instance>): Promise<Instance[]> {
  const out: Instance[] = [];
  for await (const i of it) out.push(i);
  return out;
}

describe('kubernetes lifecycle: ensure', () => {
  it('creates a Secret with the credentials and a Pod that reads them by secretKeyRef, none in its spec', async () => {
    const lc = lifecycle({ image: 'registry.local/fp:7', port: 8888 });
    const inst = await lc.ensureInstance(spec(), signal());

    const secret = kube.getSecret('proxies', 'ep-alpha-1234abcd');
    expect(secret).toMatchObject({ type: 'Opaque', metadata: { labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'alpha' } } });
    expect(decoded(secret?.data)).toEqual({
      PROXY_USER: 'u-alpha',
      PROXY_PASSWORD: 's3cret-pw',
      EGRESS_PROXY_POLICY: JSON.stringify(proxyEgressPolicy(undefined, undefined)),
    });

    const pod = kube.getPod('proxies', 'ep-alpha-1234abcd');
    expect(pod?.metadata.labels).toEqual({ ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'alpha' });
    const container = pod?.spec.containers[0] as unknown as { image: string; ports: { containerPort: number }[]; env: unknown[] };
    expect(container.image).toBe('registry.local/fp:7');
    expect(container.ports[0]?.containerPort).toBe(8888);
    expect(container.env).toEqual([
      { name: 'PROXY_PORT', value: '8888' },
      { name: 'PROXY_USER', valueFrom: { secretKeyRef: { name: 'ep-alpha-1234abcd', key: 'PROXY_USER' } } },
      { name: 'PROXY_PASSWORD', valueFrom: { secretKeyRef: { name: 'ep-alpha-1234abcd', key: 'PROXY_PASSWORD' } } },
      { name: 'EGRESS_PROXY_POLICY', valueFrom: { secretKeyRef: { name: 'ep-alpha-1234abcd', key: 'EGRESS_PROXY_POLICY' } } },
    ]);
    // Neither value is anywhere in the Pod as stored, nor in the Pod create the server received.
    expect(JSON.stringify(pod)).not.toContain('s3cret-pw');
    expect(JSON.stringify(pod)).not.toContain('u-alpha"');
    expect(creates()[0]?.body).not.toContain('s3cret-pw');
    // The Secret exists before the Pod that reads it.
    const order = kube.requests.filter((r) => r.method === 'POST').map((r) => r.path.split('/').pop());
    expect(order).toEqual(['secrets', 'pods']);
    expect(inst).toMatchObject({
      name: 'ep-alpha-1234abcd',
      id: pod?.metadata.uid,
      state: 'provisioning',
      placement: 'proxies',
      owner: { fleet: 'fleet-a', proxy: 'alpha' },
    });
    expect(inst.endpoint).toBeUndefined();
    expect(Date.parse(inst.createdAt)).not.toBeNaN();
    expect(creates()[0]?.authorization).toBe(`Bearer ${kube.token}`);
  });

  it('adopts our Pod when the create answers 409 AlreadyExists', async () => {
    const lc = lifecycle();
    const first = await lc.ensureInstance(spec(), signal());
    // The next read misses it (as a read racing another worker's create would).
    kube.injectFault({ status: 404, match: { method: 'GET', path: '/api/v1/namespaces/proxies/pods/ep-alpha-1234abcd' } });
    const inst = await lc.ensureInstance(spec(), signal());
    expect(inst).toMatchObject({ id: first.id, state: 'provisioning' });
    expect(creates().map((r) => r.status)).toEqual([201, 409]);
    expect(kube.listPods('proxies')).toHaveLength(1);
  });

  it('adopts the Secret a crashed ensure left (409 on its create), and replaces it when the credentials differ', async () => {
    kube.seedSecret({
      metadata: { name: 'ep-alpha-1234abcd', namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'alpha' } },
      type: 'Opaque',
      stringData: { PROXY_USER: 'u-alpha', PROXY_PASSWORD: 'older-pw' },
    });
    kube.injectFault({ status: 404, match: { method: 'GET', path: '/api/v1/namespaces/proxies/secrets/ep-alpha-1234abcd' } });
    await lifecycle().ensureInstance(spec(), signal());
    const secretWrites = kube.requests.filter((r) => r.path.startsWith('/api/v1/namespaces/proxies/secrets') && r.method !== 'GET');
    expect(secretWrites.map((r) => [r.method, r.status])).toEqual([
      ['POST', 409],
      ['PUT', 200],
    ]);
    expect(decoded(kube.getSecret('proxies', 'ep-alpha-1234abcd')?.data)).toMatchObject({ PROXY_USER: 'u-alpha', PROXY_PASSWORD: 's3cret-pw' });
    expect(kube.listSecrets('proxies')).toHaveLength(1);
  });

  it('uses the placement as the namespace', async () => {
    kube.store.namespaces.add('edge');
    const inst = await lifecycle().ensureInstance({ ...spec(), placement: 'edge' }, signal());
    expect(inst.placement).toBe('edge');
    expect(kube.getPod('edge', 'ep-alpha-1234abcd')).toBeDefined();
  });

  it('never logs the credentials, nor puts them in an error message', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk, _enc, cb) => void (lines.push(String(chunk)), cb()) });
    const lc = lifecycle({ logger: pino({ level: 'trace' }, sink) });
    await lc.ensureInstance(spec(), signal());
    // A credential change whose Secret update fails (409 Conflict), then succeeds.
    const changed = { ...spec(), credentials: { username: 'u-alpha', password: 'n3w-secret-pw' } };
    kube.injectFault({ status: 409, reason: 'Conflict', match: { method: 'PUT' } });
    const err = await lc.ensureInstance(changed, signal()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesRequestError);
    await lc.ensureInstance(changed, signal());
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal());
    expect(lines.length).toBeGreaterThan(0);
    const everything = lines.join('') + String((err as Error).message) + JSON.stringify(err);
    for (const value of ['s3cret-pw', 'n3w-secret-pw', b64('s3cret-pw'), b64('n3w-secret-pw')]) expect(everything).not.toContain(value);
  });

  it('refuses a Pod of that name without our labels, and one owned by another proxy, making nothing next to it', async () => {
    kube.seedPod({ metadata: { name: 'ep-alpha-1234abcd', namespace: 'proxies', labels: { app: 'other' } } });
    await expect(lifecycle().ensureInstance(spec(), signal())).rejects.toBeInstanceOf(ProvisioningError);
    kube.seedPod({ metadata: { name: 'ep-beta', namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'beta' } } });
    await expect(lifecycle().ensureInstance(spec('ep-beta'), signal())).rejects.toThrow(/belongs to proxy "beta"/);
    expect(creates()).toHaveLength(0);
    expect(kube.listSecrets('proxies')).toEqual([]);
  });

  it('refuses a Secret of that name without our labels and leaves it as it was', async () => {
    const foreign = kube.seedSecret({
      metadata: { name: 'ep-alpha-1234abcd', namespace: 'proxies', labels: { app: 'db' } },
      stringData: { PROXY_PASSWORD: 'theirs' },
    });
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as Error).message).toContain('a Secret named "ep-alpha-1234abcd" exists in namespace "proxies" without our labels');
    expect(kube.getSecret('proxies', 'ep-alpha-1234abcd')).toEqual(foreign);
    expect(creates()).toHaveLength(0);
  });
});

describe('kubernetes lifecycle: state', () => {
  it('is provisioning while Pending, running with an endpoint once Running and Ready, stopping while terminating', async () => {
    const lc = lifecycle();
    await lc.ensureInstance(spec(), signal());
    expect((await lc.getInstance('ep-alpha-1234abcd', undefined, signal()))?.state).toBe('provisioning');

    kube.setPodStatus('proxies', 'ep-alpha-1234abcd', { phase: 'Running', podIP: '10.1.2.3', ready: false });
    expect((await lc.getInstance('ep-alpha-1234abcd', undefined, signal()))?.state).toBe('provisioning');

    kube.setPodStatus('proxies', 'ep-alpha-1234abcd', { ready: true });
    const running = await lc.getInstance('ep-alpha-1234abcd', undefined, signal());
    expect(running).toMatchObject({ state: 'running', endpoint: { host: '10.1.2.3', port: 3128 } });

    // Bound to a node now, so the fake deletes it gracefully (deletionTimestamp set).
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal());
    expect((await lc.getInstance('ep-alpha-1234abcd', undefined, signal()))?.state).toBe('stopping');
    // The terminating Pod still runs with its Secret: the Secret stays until the Pod is gone.
    expect(kube.getSecret('proxies', 'ep-alpha-1234abcd')).toBeDefined();
    kube.finishPodDeletion('proxies', 'ep-alpha-1234abcd');
    expect(await lc.getInstance('ep-alpha-1234abcd', undefined, signal())).toMatchObject({ state: 'stopped', message: 'the Pod is gone; its Secret is left' });
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal());
    expect(kube.getSecret('proxies', 'ep-alpha-1234abcd')).toBeUndefined();
    expect(await lc.getInstance('ep-alpha-1234abcd', undefined, signal())).toBeUndefined();
  });

  it('reports a Failed Pod as failed with the container message', async () => {
    kube.seedPod({
      metadata: { name: 'ep-f', namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'f' } },
      status: {
        phase: 'Failed',
        containerStatuses: [{ name: 'proxy', state: { terminated: { exitCode: 2, reason: 'Error', message: 'no PROXY_PASSWORD given' } } }],
      },
    });
    const inst = await lifecycle().getInstance('ep-f', undefined, signal());
    expect(inst).toMatchObject({ state: 'failed', message: 'Error: no PROXY_PASSWORD given' });
  });

  it('reports an invalid image name as failed while the Pod is still Pending', async () => {
    kube.seedPod({
      metadata: { name: 'ep-i', namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'i' } },
      status: {
        phase: 'Pending',
        containerStatuses: [{ name: 'proxy', state: { waiting: { reason: 'InvalidImageName', message: 'couldn\'t parse image name "A:B:C"' } } }],
      },
    });
    expect(await lifecycle().getInstance('ep-i', undefined, signal())).toMatchObject({ state: 'failed', message: expect.stringContaining('InvalidImageName') });
  });
});

describe('kubernetes lifecycle: delete', () => {
  it('deletes the Pod and then the Secret, and deleting a missing one is no error', async () => {
    const lc = lifecycle();
    await lc.ensureInstance(spec(), signal());
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal());
    expect(kube.getPod('proxies', 'ep-alpha-1234abcd')).toBeUndefined();
    expect(kube.getSecret('proxies', 'ep-alpha-1234abcd')).toBeUndefined();
    const deletes = kube.requests.filter((r) => r.method === 'DELETE').map((r) => r.path.split('/').at(-2));
    expect(deletes).toEqual(['pods', 'secrets']);
    expect(await lc.getInstance('ep-alpha-1234abcd', undefined, signal())).toBeUndefined();
    await expect(lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal())).resolves.toBeUndefined();
  });

  it('treats a 404 from the delete itself (gone in between) as done', async () => {
    const lc = lifecycle();
    await lc.ensureInstance(spec(), signal());
    kube.injectFault({ status: 404, match: { method: 'DELETE', path: /\/secrets\// } });
    await expect(lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal())).resolves.toBeUndefined();
    expect(kube.getPod('proxies', 'ep-alpha-1234abcd')).toBeUndefined();
  });
});

describe('kubernetes lifecycle: inventory', () => {
  it("pages through every page and returns exactly the fleet's managed Pods", async () => {
    const mine: string[] = [];
    for (let i = 0; i < 7; i++) {
      const name = `ep-mine-${i}`;
      mine.push(name);
      kube.seedPod({
        metadata: { name, namespace: i % 2 ? 'proxies' : 'default', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: `p${i}` } },
      });
    }
    kube.seedPod({ metadata: { name: 'ep-other-fleet', namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-b', [PROXY_LABEL]: 'x' } } });
    kube.seedPod({ metadata: { name: 'ep-unmanaged', namespace: 'proxies', labels: { [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'y' } } });
    kube.seedPod({ metadata: { name: 'ep-no-labels', namespace: 'default' } });

    const found = await collect(lifecycle({ pageSize: 2 }).listInstances('fleet-a', signal()));

    expect(found.map((i) => i.name).sort()).toEqual(mine.sort());
    expect(found.every((i) => i.owner.fleet === 'fleet-a')).toBe(true);
    const lists = kube.requests.filter((r) => r.path === '/api/v1/pods');
    expect(lists.length).toBe(4);
    expect(lists.every((r) => r.query.limit === '2' && r.query.labelSelector === `app=egress-proxy,managed-by=egress-proxies,${FLEET_LABEL}=fleet-a`)).toBe(
      true,
    );
    expect(lists.slice(1).every((r) => Boolean(r.query.continue))).toBe(true);
  });

  it('fails the sweep with a retryable error when a continue token has expired', async () => {
    for (let i = 0; i < 3; i++)
      kube.seedPod({ metadata: { name: `ep-${i}`, namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: `p${i}` } } });
    const iter = lifecycle({ pageSize: 1 }).listInstances('fleet-a', signal())[Symbol.asyncIterator]();
    expect((await iter.next()).value).toMatchObject({ name: 'ep-0' });
    kube.expireContinueTokens();
    const err = await iter.next().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesRequestError);
    expect(err).toMatchObject({ status: 410, reason: 'Expired', retryable: true });
  });
});

describe('kubernetes lifecycle: namespaced (a Role per namespace, no cluster-wide rights)', () => {
  const seedMine = (name: string, namespace: string): unknown =>
    kube.seedPod({ metadata: { name, namespace, labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: name } } });

  it('lists in each of its namespaces only, so a token without cluster-wide list rights sweeps', async () => {
    kube.store.namespaces.add('extra');
    seedMine('ep-in-proxies', 'proxies');
    seedMine('ep-in-extra', 'extra');
    seedMine('ep-in-default', 'default');
    kube.forbid(kube.token, ['list'], ['pods', 'secrets'], { clusterScopeOnly: true });

    await expect(collect(lifecycle().listInstances('fleet-a', signal()))).rejects.toThrow(/cannot list resource "pods" in API group "" at the cluster scope/);
    const found = await collect(lifecycle({ namespaces: ['extra'] }).listInstances('fleet-a', signal()));

    expect(found.map((i) => `${i.placement ?? ''}/${i.name}`).sort()).toEqual(['extra/ep-in-extra', 'proxies/ep-in-proxies']);
    const lists = kube.requests.filter((r) => r.method === 'GET' && r.status === 200 && /\/(pods|secrets)$/.test(r.path)).map((r) => r.path);
    expect(lists).toEqual([
      '/api/v1/namespaces/extra/pods',
      '/api/v1/namespaces/proxies/pods',
      '/api/v1/namespaces/extra/secrets',
      '/api/v1/namespaces/proxies/secrets',
    ]);
  });

  it('refuses a placement outside its namespaces before writing anything, naming the placement', async () => {
    const err = await lifecycle({ namespaces: ['proxies'] })
      .ensureInstance({ ...spec(), placement: 'kube-system' }, signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as Error).message).toBe(
      'placement "kube-system": expected one of the provider\'s namespaces ("proxies"); add it to the provider\'s namespaces (and grant the provider\'s Role there)',
    );
    expect(kube.requests.filter((r) => r.method !== 'GET')).toEqual([]);
  });
});

describe('kubernetes lifecycle: errors and cancellation', () => {
  it('maps 422 Invalid on create to ProvisioningError with the server message', async () => {
    const err = await lifecycle()
      .ensureInstance(spec('Bad_Name'), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as Error).message).toContain('Invalid value: "Bad_Name"');
  });

  it('maps a missing namespace on create to ProvisioningError', async () => {
    await expect(lifecycle().ensureInstance({ ...spec(), placement: 'nowhere' }, signal())).rejects.toBeInstanceOf(ProvisioningError);
  });

  it('maps 403 on create to KubernetesAccessError: not a provisioning failure, not retryable by itself', async () => {
    kube.forbid(kube.token, ['create'], ['pods']);
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesAccessError);
    expect(err).not.toBeInstanceOf(ProvisioningError);
    expect(err).toMatchObject({ status: 403, retryable: false });
    expect((err as Error).message).toContain('cannot create resource "pods"');
    // The server was asked whether this identity may create Pods there, and said no.
    const review = kube.requests.find((r) => r.path === '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews');
    expect(JSON.parse(review?.body ?? '{}')).toMatchObject({
      spec: { resourceAttributes: { namespace: 'proxies', verb: 'create', resource: 'pods', group: '' } },
    });
    expect(JSON.parse(review?.responseBody ?? '{}')).toMatchObject({ status: { allowed: false } });
  });

  it('maps a 503 to a retryable KubernetesRequestError', async () => {
    kube.injectFault({ status: 503, match: { method: 'POST' } });
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 503, retryable: true });
    expect(err).toBeInstanceOf(KubernetesRequestError);
  });

  it("aborts the HTTP request when the signal ends, rejecting with the signal's reason", async () => {
    kube.injectFault({ latencyMs: 60_000, match: { method: 'GET' } });
    const ac = new AbortController();
    const pending = lifecycle().getInstance('ep-alpha-1234abcd', undefined, ac.signal);
    await kube.nextRequest();
    const aborted = kube.nextClientAbort();
    const reason = new Error('deadline');
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect((await aborted).method).toBe('GET');
  });
});

describe('kubernetes lifecycle: credentials change', () => {
  const changed = (): InstanceSpec => ({ ...spec(), credentials: { username: 'u-alpha', password: 'rotated-pw' } });

  it('updates the Secret and replaces the Pod, which runs with a container that read the old values', async () => {
    const lc = lifecycle();
    const before = await lc.ensureInstance(spec(), signal());
    kube.setPodStatus('proxies', 'ep-alpha-1234abcd', { phase: 'Running', podIP: '10.1.2.3', ready: true });

    const replacing = await lc.ensureInstance(changed(), signal());
    expect(replacing).toMatchObject({ state: 'stopping', message: 'replacing Pod "ep-alpha-1234abcd": its credentials or egress policy changed' });
    expect(replacing.endpoint).toBeUndefined();
    expect(decoded(kube.getSecret('proxies', 'ep-alpha-1234abcd')?.data).PROXY_PASSWORD).toBe('rotated-pw');
    // Bound to a node: terminating; the next looks wait, then make the new Pod once the old one is gone.
    expect((await lc.ensureInstance(changed(), signal())).state).toBe('stopping');
    kube.finishPodDeletion('proxies', 'ep-alpha-1234abcd');
    const after = await lc.ensureInstance(changed(), signal());
    expect(after.state).toBe('provisioning');
    expect(after.id).not.toBe(before.id);
    expect(kube.listPods('proxies')).toHaveLength(1);
    expect(creates().filter((r) => r.status === 201)).toHaveLength(2);
    // Settled: a further look changes nothing.
    expect((await lc.ensureInstance(changed(), signal())).id).toBe(after.id);
    expect(creates().filter((r) => r.status === 201)).toHaveLength(2);
  });

  it('replaces a Pod made before credentials moved to a Secret (plain env values, no annotation) once', async () => {
    kube.seedPod({
      metadata: { name: 'ep-alpha-1234abcd', namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'alpha' } },
      spec: { containers: [{ name: 'proxy', image: 'fp:1', env: [{ name: 'PROXY_PASSWORD', value: 's3cret-pw' }] }] },
    });
    const lc = lifecycle();
    expect((await lc.ensureInstance(spec(), signal())).state).toBe('stopping');
    // Not bound to a node, so the fake deleted it at once; the next look makes the new one.
    expect(kube.getPod('proxies', 'ep-alpha-1234abcd')).toBeUndefined();
    await lc.ensureInstance(spec(), signal());
    const fresh = kube.getPod('proxies', 'ep-alpha-1234abcd');
    expect(JSON.stringify(fresh?.spec)).not.toContain('s3cret-pw');
    expect(fresh?.metadata.annotations?.['egress-proxies/secret-version']).toBe(kube.getSecret('proxies', 'ep-alpha-1234abcd')?.metadata.resourceVersion);
  });

  it('never leaves two Pods when duplicated reconciles see the change at once, nor when one crashed after the Secret update', async () => {
    const lc = lifecycle();
    await lc.ensureInstance(spec(), signal());
    // Duplicated looks race through the change; unbound Pods go at once, so creates race the deletes.
    for (let round = 0; round < 3; round++) {
      await Promise.all([lc.ensureInstance(changed(), signal()), lc.ensureInstance(changed(), signal()), lc.ensureInstance(changed(), signal())]);
      expect(kube.listPods('proxies').length).toBeLessThanOrEqual(1);
    }
    const pod = kube.getPod('proxies', 'ep-alpha-1234abcd');
    expect(pod?.metadata.annotations?.['egress-proxies/secret-version']).toBe(kube.getSecret('proxies', 'ep-alpha-1234abcd')?.metadata.resourceVersion);

    // A worker that updated the Secret and died before replacing the Pod: the next look replaces it.
    kube.injectFault({ destroySocket: 'before-headers', match: { method: 'DELETE' } });
    const third = { ...spec(), credentials: { username: 'u-alpha', password: 'third-pw' } };
    await expect(lc.ensureInstance(third, signal())).rejects.toBeInstanceOf(KubernetesRequestError);
    expect(kube.getPod('proxies', 'ep-alpha-1234abcd')?.metadata.uid).toBe(pod?.metadata.uid);
    expect((await lc.ensureInstance(third, signal())).state).toBe('stopping');
    const fresh = await lc.ensureInstance(third, signal());
    expect(fresh.id).not.toBe(pod?.metadata.uid);
    expect(kube.listPods('proxies')).toHaveLength(1);
  });
});

describe('kubernetes lifecycle: egress policy', () => {
  // The listeners of an `egress up` process: its private Redis (stable port), the API and the echo.
  const guards = egressGuards({ redisUrl: 'redis://:pw@127.0.0.1:46379', api: { host: '127.0.0.1', port: 8080 }, echoUrl: 'http://127.0.0.1:8080/v1/echo' });
  const policyOf = (allow: string[]): ProxyEgressPolicy => proxyEgressPolicy({ allow, deny: ['192.0.2.0/24'] }, guards);
  const pod = () => kube.getPod('proxies', 'ep-alpha-1234abcd');
  const secretWrites = () => kube.requests.filter((r) => r.path.includes('/secrets') && r.method !== 'GET');
  const podDeletes = () => kube.requests.filter((r) => r.path.includes('/pods/') && r.method === 'DELETE');

  it("the provider puts its proxies.egressPolicy and the process's guarded listeners in the Secret, which the container reads as EGRESS_PROXY_POLICY", async () => {
    const config = kubernetesProviderSchema.parse({
      name: 'k8s',
      type: 'kubernetes',
      server: kube.url,
      tokenFile: '/nonexistent',
      namespace: 'proxies',
      proxies: { egressPolicy: { allow: ['10.20.0.0/16'], deny: ['192.0.2.0/24'] } },
    });
    const provider = createKubernetesProvider(
      config,
      { logger: silentLogger(), registry: new Registry(), dataDir: '/nonexistent', egress: guards },
      { kubeConfig: kube.kubeConfig() },
    );
    await provider.lifecycle?.ensureInstance(spec(), signal());
    const env = podEnv(kube, pod()!);
    expect(env.EGRESS_PROXY_POLICY).toBe(JSON.stringify(policyOf(['10.20.0.0/16'])));
    expect(JSON.parse(env.EGRESS_PROXY_POLICY ?? '')).toEqual({
      version: 1,
      allow: ['10.20.0.0/16'],
      deny: ['192.0.2.0/24'],
      guarded: [
        { host: '127.0.0.1', port: 46379, role: 'redis' },
        { host: '127.0.0.1', port: 8080, role: 'api' },
      ],
      echo: { host: '127.0.0.1', port: 8080, path: '/v1/echo' },
    });
    // By reference only: the document is not in the Pod spec.
    expect(JSON.stringify(pod()?.spec)).not.toContain('10.20.0.0/16');
    await provider.close();
  });

  it('a changed policy updates the Secret and replaces the Pod, whose successor reads the new document; settled, nothing is written', async () => {
    const before = await lifecycle({ egressPolicy: policyOf(['10.20.0.0/16']) }).ensureInstance(spec(), signal());
    kube.setPodStatus('proxies', 'ep-alpha-1234abcd', { phase: 'Running', podIP: '10.1.2.3', ready: true });
    const oldVersion = kube.getSecret('proxies', 'ep-alpha-1234abcd')?.metadata.resourceVersion;

    // A configuration rollout: the workers are rebuilt with the new policy.
    const lc = lifecycle({ egressPolicy: policyOf(['10.20.0.0/16', '172.16.5.0/24']) });
    const replacing = await lc.ensureInstance(spec(), signal());
    expect(replacing).toMatchObject({ state: 'stopping', message: 'replacing Pod "ep-alpha-1234abcd": its credentials or egress policy changed' });
    expect(secretWrites().map((r) => r.method)).toEqual(['POST', 'PUT']);
    expect(kube.getSecret('proxies', 'ep-alpha-1234abcd')?.metadata.resourceVersion).not.toBe(oldVersion);
    expect(decoded(kube.getSecret('proxies', 'ep-alpha-1234abcd')?.data)).toMatchObject({ PROXY_PASSWORD: 's3cret-pw' });
    kube.finishPodDeletion('proxies', 'ep-alpha-1234abcd');
    const after = await lc.ensureInstance(spec(), signal());
    expect(after.id).not.toBe(before.id);
    expect(JSON.parse(podEnv(kube, pod()!).EGRESS_PROXY_POLICY ?? '').allow).toEqual(['10.20.0.0/16', '172.16.5.0/24']);

    const requests = kube.requests.length;
    await lc.ensureInstance(spec(), signal());
    expect(kube.requests.slice(requests).map((r) => r.method)).toEqual(['GET', 'GET']);
    expect(podDeletes()).toHaveLength(1);
  });

  it('an unchanged policy writes nothing, also from a restarted worker that builds the same document again', async () => {
    await lifecycle({ egressPolicy: policyOf(['10.20.0.0/16']) }).ensureInstance(spec(), signal());
    kube.setPodStatus('proxies', 'ep-alpha-1234abcd', { phase: 'Running', podIP: '10.1.2.3', ready: true });
    const uid = pod()?.metadata.uid;
    const requests = kube.requests.length;
    // A restart: new guards from the same listeners (the private Redis keeps its port), a new lifecycle.
    const again = egressGuards({ redisUrl: 'redis://:pw@127.0.0.1:46379', api: { host: '127.0.0.1', port: 8080 }, echoUrl: 'http://127.0.0.1:8080/v1/echo' });
    const lc = lifecycle({ egressPolicy: proxyEgressPolicy({ allow: ['10.20.0.0/16'], deny: ['192.0.2.0/24'] }, again) });
    for (let i = 0; i < 3; i++) expect((await lc.ensureInstance(spec(), signal())).state).toBe('running');
    expect(kube.requests.slice(requests).every((r) => r.method === 'GET')).toBe(true);
    expect(pod()?.metadata.uid).toBe(uid);
  });

  it('replaces, once, a Pod and Secret from before the policy (no EGRESS_PROXY_POLICY key or env var)', async () => {
    const labels = { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'alpha' };
    const old = kube.seedSecret({
      metadata: { name: 'ep-alpha-1234abcd', namespace: 'proxies', labels },
      type: 'Opaque',
      stringData: { PROXY_USER: 'u-alpha', PROXY_PASSWORD: 's3cret-pw' },
    });
    const envOf = (key: string) => ({ name: key, valueFrom: { secretKeyRef: { name: 'ep-alpha-1234abcd', key } } });
    kube.seedPod({
      metadata: {
        name: 'ep-alpha-1234abcd',
        namespace: 'proxies',
        labels,
        annotations: { 'egress-proxies/secret-version': old.metadata.resourceVersion ?? '' },
      },
      spec: { containers: [{ name: 'proxy', image: 'fp:1', env: [envOf('PROXY_USER'), envOf('PROXY_PASSWORD')] }] },
    });
    const lc = lifecycle({ egressPolicy: policyOf([]) });
    expect((await lc.ensureInstance(spec(), signal())).state).toBe('stopping');
    expect(secretWrites().map((r) => r.method)).toEqual(['PUT']);
    await lc.ensureInstance(spec(), signal());
    expect(podEnv(kube, pod()!).EGRESS_PROXY_POLICY).toBe(JSON.stringify(policyOf([])));
    const requests = kube.requests.length;
    await lc.ensureInstance(spec(), signal());
    expect(kube.requests.slice(requests).every((r) => r.method === 'GET')).toBe(true);
  });

  it('replaces a Pod an earlier release made for the current Secret (a rolling upgrade), since it does not read the policy', async () => {
    const lc = lifecycle({ egressPolicy: policyOf([]) });
    await lc.ensureInstance(spec(), signal());
    const current = pod()!;
    // An earlier worker replaced it meanwhile with a Pod of its own making: right annotation, no policy env.
    const containers = (current.spec.containers as { env?: { name: string }[] }[]).map((c) => ({
      ...c,
      env: c.env?.filter((e) => e.name !== 'EGRESS_PROXY_POLICY'),
    }));
    kube.seedPod({ metadata: { ...current.metadata, uid: undefined, resourceVersion: undefined }, spec: { ...current.spec, containers } });
    expect((await lc.ensureInstance(spec(), signal())).state).toBe('stopping');
    await lc.ensureInstance(spec(), signal());
    expect(podEnv(kube, pod()!).EGRESS_PROXY_POLICY).toBe(JSON.stringify(policyOf([])));
  });
});

describe('kubernetes lifecycle: Service', () => {
  const running = (): void => void kube.setPodStatus('proxies', 'ep-alpha-1234abcd', { phase: 'Running', podIP: '10.1.2.3', ready: true });

  it('ClusterIP: creates a Service selecting the Pod; the endpoint is the cluster IP and the proxy port', async () => {
    const lc = lifecycle({ port: 8888, service: { type: 'ClusterIP' } });
    await lc.ensureInstance(spec(), signal());
    const svc = kube.getService('proxies', 'ep-alpha-1234abcd') as unknown as {
      metadata: { labels: Record<string, string> };
      spec: { type: string; clusterIP: string; selector: Record<string, string>; ports: unknown[] };
    };
    const owner = { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'alpha' };
    expect(svc.metadata.labels).toEqual(owner);
    expect(svc.spec).toMatchObject({ type: 'ClusterIP', selector: owner, ports: [{ name: 'proxy', protocol: 'TCP', port: 8888, targetPort: 8888 }] });
    expect(svc.spec.clusterIP).toMatch(/^10\.9[6-9]|^10\.1[01]\d\./);
    running();
    expect(await lc.getInstance('ep-alpha-1234abcd', undefined, signal())).toMatchObject({
      state: 'running',
      endpoint: { host: svc.spec.clusterIP, port: 8888 },
    });
    expect((await lc.ensureInstance(spec(), signal())).endpoint).toEqual({ host: svc.spec.clusterIP, port: 8888 });
    expect(kube.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/services'))).toHaveLength(1);
  });

  it('NodePort: the endpoint is the configured node address and the allocated node port', async () => {
    const lc = lifecycle({ service: { type: 'NodePort', nodeAddress: 'nodes.example.net' } });
    await lc.ensureInstance(spec(), signal());
    const nodePort = (kube.getService('proxies', 'ep-alpha-1234abcd') as unknown as { spec: { ports: { nodePort: number }[] } }).spec.ports[0]?.nodePort ?? 0;
    expect(nodePort).toBeGreaterThanOrEqual(30000);
    expect(nodePort).toBeLessThanOrEqual(32767);
    running();
    expect(await lc.getInstance('ep-alpha-1234abcd', undefined, signal())).toMatchObject({
      state: 'running',
      endpoint: { host: 'nodes.example.net', port: nodePort },
    });
  });

  it('LoadBalancer: provisioning until the load balancer has an ingress, then its IP (or hostname) and the port', async () => {
    const lc = lifecycle({ service: { type: 'LoadBalancer' } });
    await lc.ensureInstance(spec(), signal());
    running();
    const waiting = await lc.ensureInstance(spec(), signal());
    expect(waiting).toMatchObject({ state: 'provisioning', message: 'waiting for the load balancer of Service "ep-alpha-1234abcd" to get an address' });
    expect(waiting.endpoint).toBeUndefined();
    kube.setServiceLoadBalancer('proxies', 'ep-alpha-1234abcd', [{ ip: '203.0.113.7' }]);
    expect(await lc.ensureInstance(spec(), signal())).toMatchObject({ state: 'running', endpoint: { host: '203.0.113.7', port: 3128 } });
    kube.setServiceLoadBalancer('proxies', 'ep-alpha-1234abcd', [{ hostname: 'lb-1.example.net' }]);
    expect((await lc.getInstance('ep-alpha-1234abcd', undefined, signal()))?.endpoint).toEqual({ host: 'lb-1.example.net', port: 3128 });
  });

  it('delete removes the Pod, the Service and the Secret, and reports the instance until all are gone', async () => {
    const lc = lifecycle({ service: { type: 'ClusterIP' } });
    await lc.ensureInstance(spec(), signal());
    kube.injectFault({ status: 503, match: { method: 'DELETE', path: /\/secrets\// } });
    await expect(lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal())).rejects.toBeInstanceOf(
      KubernetesRequestError,
    );
    expect(kube.getPod('proxies', 'ep-alpha-1234abcd')).toBeUndefined();
    expect(kube.getService('proxies', 'ep-alpha-1234abcd')).toBeUndefined();
    expect(await lc.getInstance('ep-alpha-1234abcd', undefined, signal())).toMatchObject({ state: 'stopped' });
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal());
    expect(kube.listSecrets()).toEqual([]);
    expect(await lc.getInstance('ep-alpha-1234abcd', undefined, signal())).toBeUndefined();
    expect(kube.requests.filter((r) => r.method === 'DELETE').map((r) => r.path.split('/').at(-2))).toEqual(['pods', 'services', 'secrets', 'secrets']);
  });

  it('changes the type of an existing Service when the configuration changed, keeping its cluster IP', async () => {
    await lifecycle({ service: { type: 'ClusterIP' } }).ensureInstance(spec(), signal());
    const before = kube.getService('proxies', 'ep-alpha-1234abcd') as unknown as { spec: { clusterIP: string } };
    running();
    const lc = lifecycle({ service: { type: 'NodePort', nodeAddress: '192.0.2.1' } });
    const inst = await lc.ensureInstance(spec(), signal());
    const after = kube.getService('proxies', 'ep-alpha-1234abcd') as unknown as { spec: { type: string; clusterIP: string; ports: { nodePort: number }[] } };
    expect(after.spec).toMatchObject({ type: 'NodePort', clusterIP: before.spec.clusterIP });
    expect(inst.endpoint).toEqual({ host: '192.0.2.1', port: after.spec.ports[0]?.nodePort });
    expect(kube.requests.filter((r) => r.method === 'PUT').map((r) => r.path)).toEqual(['/api/v1/namespaces/proxies/services/ep-alpha-1234abcd']);
  });

  it('refuses a Service of that name without our labels', async () => {
    kube.seedService({ metadata: { name: 'ep-alpha-1234abcd', namespace: 'proxies', labels: { app: 'web' } }, spec: { ports: [{ port: 80 }] } });
    await expect(lifecycle({ service: { type: 'ClusterIP' } }).ensureInstance(spec(), signal())).rejects.toThrow(
      'a Service named "ep-alpha-1234abcd" exists in namespace "proxies" without our labels',
    );
    expect(creates()).toHaveLength(0);
    await expect(
      lifecycle({ service: { type: 'ClusterIP' } }).deleteInstance('ep-alpha-1234abcd', undefined, { owner: spec().owner, nameIsOurs: true }, signal()),
    ).rejects.toThrow('not deleting "ep-alpha-1234abcd": Service in namespace "proxies": it carries no owner labels or tag of egress-proxies');
    expect(kube.getService('proxies', 'ep-alpha-1234abcd')).toBeDefined();
  });

  it('without a Service configured, the endpoint stays the Pod IP and no Service is made', async () => {
    const lc = lifecycle();
    await lc.ensureInstance(spec(), signal());
    running();
    expect((await lc.getInstance('ep-alpha-1234abcd', undefined, signal()))?.endpoint).toEqual({ host: '10.1.2.3', port: 3128 });
    expect(kube.listServices()).toEqual([]);
    expect(kube.requests.some((r) => r.path.includes('/services'))).toBe(false);
  });
});

describe('kubernetes lifecycle: admission refusals and RBAC refusals (both 403 Forbidden)', () => {
  it('a ResourceQuota refusal is a ProvisioningError with the server message (the proxy ends Failed)', async () => {
    kube.setQuota('proxies', { pods: 1 }, 'proxy-pods');
    kube.seedPod({ metadata: { name: 'someone-else', namespace: 'proxies' } });
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as Error).message).toBe(
      'creating Pod "ep-alpha-1234abcd" in namespace "proxies": pods "ep-alpha-1234abcd" is forbidden: exceeded quota: proxy-pods, requested: pods=1, used: pods=1, limited: pods=1',
    );
    const review = kube.requests.find((r) => r.path.endsWith('/selfsubjectaccessreviews'));
    expect(JSON.parse(review?.responseBody ?? '{}')).toMatchObject({ status: { allowed: true } });
  });

  it('a quota on Secrets is named as such', async () => {
    kube.setQuota('proxies', { secrets: 0 });
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as Error).message).toContain(
      'creating Secret "ep-alpha-1234abcd" in namespace "proxies": secrets "ep-alpha-1234abcd" is forbidden: exceeded quota',
    );
    expect(creates()).toHaveLength(0);
  });

  it('an RBAC refusal of the Secret create is an access error, not a provisioning failure', async () => {
    kube.forbid(kube.token, ['create'], ['secrets']);
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesAccessError);
    expect((err as Error).message).toContain('cannot create resource "secrets"');
    expect(creates()).toHaveLength(0);
  });

  it('when the review itself is refused, the 403 stays an access error', async () => {
    kube.setQuota('proxies', { pods: 0 });
    kube.forbid(kube.token, ['create'], ['selfsubjectaccessreviews']);
    const err = await lifecycle()
      .ensureInstance(spec(), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesAccessError);
    expect((err as Error).message).toContain('exceeded quota');
    const review = kube.requests.find((r) => r.path.endsWith('/selfsubjectaccessreviews'));
    expect(review?.status).toBe(403);
  });

  it('a quota refusal of a create another worker already made is the existing Pod, not a failure', async () => {
    const lc = lifecycle();
    const first = await lc.ensureInstance(spec(), signal());
    kube.setQuota('proxies', { pods: 1 });
    kube.injectFault({ status: 404, match: { method: 'GET', path: '/api/v1/namespaces/proxies/pods/ep-alpha-1234abcd' } });
    expect((await lc.ensureInstance(spec(), signal())).id).toBe(first.id);
    expect(creates().map((r) => r.status)).toEqual([201, 403]);
  });
});

describe('kubernetes lifecycle: GC of orphaned Secrets', () => {
  const owner = (proxy: string, fleet = 'fleet-a') => ({ ...MANAGED_LABELS, [FLEET_LABEL]: fleet, [PROXY_LABEL]: proxy });

  it('lists a managed Secret without a Pod as a stopped instance (createdAt from the Secret), across pages', async () => {
    const lc = lifecycle({ pageSize: 1 });
    await lc.ensureInstance(spec(), signal());
    kube.seedSecret({
      metadata: { name: 'ep-orphan-1', namespace: 'proxies', labels: owner('orphan'), creationTimestamp: '2026-01-02T03:04:05Z' },
      stringData: { PROXY_USER: 'x' },
    });
    kube.seedSecret({ metadata: { name: 'ep-orphan-2', namespace: 'default', labels: owner('orphan2') } });
    kube.seedSecret({ metadata: { name: 'ep-other-fleet', namespace: 'proxies', labels: owner('x', 'fleet-b') } });
    kube.seedSecret({ metadata: { name: 'ep-unlabelled', namespace: 'proxies', labels: { [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'y' } } });

    const found = await collect(lc.listInstances('fleet-a', signal()));
    expect(found.map((i) => [i.name, i.state]).sort()).toEqual([
      ['ep-alpha-1234abcd', 'provisioning'],
      ['ep-orphan-1', 'stopped'],
      ['ep-orphan-2', 'stopped'],
    ]);
    expect(found.find((i) => i.name === 'ep-orphan-1')).toMatchObject({
      createdAt: '2026-01-02T03:04:05.000Z',
      placement: 'proxies',
      owner: { fleet: 'fleet-a', proxy: 'orphan' },
    });
    const secretLists = kube.requests.filter((r) => r.path === '/api/v1/secrets');
    expect(secretLists.length).toBeGreaterThan(1);
    expect(
      secretLists.every((r) => r.query.labelSelector === `app=egress-proxy,managed-by=egress-proxies,${FLEET_LABEL}=fleet-a` && r.query.limit === '1'),
    ).toBe(true);
  });

  it('a GC sweep deletes an orphaned Secret past the grace period, and never one without our labels', async () => {
    const old = '2026-01-01T00:00:00Z';
    kube.seedSecret({
      metadata: { name: 'ep-orphan-1', namespace: 'proxies', labels: owner('gone'), creationTimestamp: old },
      stringData: { PROXY_PASSWORD: 'x' },
    });
    kube.seedSecret({ metadata: { name: 'ep-young', namespace: 'proxies', labels: owner('gone2') } });
    kube.seedSecret({ metadata: { name: 'db-password', namespace: 'proxies', labels: { app: 'db' }, creationTimestamp: old } });
    // Named like an instance and carrying our fleet and proxy labels, but not the managed ones.
    kube.seedSecret({
      metadata: { name: 'ep-lookalike', namespace: 'proxies', labels: { [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'gone' }, creationTimestamp: old },
    });
    const proxies = { list: () => Promise.resolve([]), get: () => Promise.resolve(undefined) } as unknown as GcDeps['proxies'];
    const result = await sweepProvider('k8s', lifecycle(), { proxies, fleet: 'fleet-a', graceMs: 60_000, logger: silentLogger() }, signal());
    expect(result.deleted).toEqual([{ name: 'ep-orphan-1', reason: 'no-proxy' }]);
    expect(result.young).toBe(1);
    expect(kube.listSecrets('proxies').map((s) => s.metadata.name)).toEqual(['db-password', 'ep-lookalike', 'ep-young']);
  });
});

describe('kubernetes provider config: proxies.service', () => {
  const parse = (service: unknown) =>
    parseConfigDocument(
      { providers: [{ name: 'k8s', type: 'kubernetes', server: 'https://10.0.0.1:6443', tokenFile: '/t', proxies: { service } }] },
      'egress.yaml',
    );
  const failure = (service: unknown): string => {
    try {
      parse(service);
    } catch (e) {
      return (e as Error).message;
    }
    throw new Error('expected a configuration error');
  };

  it('accepts the three types, NodePort with its nodeAddress', () => {
    for (const service of [{ type: 'ClusterIP' }, { type: 'LoadBalancer' }, { type: 'NodePort', nodeAddress: '192.0.2.10' }]) {
      const p = parse(service).providers[0];
      expect(p?.type === 'kubernetes' ? p.proxies?.service : undefined).toEqual(service);
    }
  });

  it('names the field in its errors', () => {
    expect(failure({ type: 'NodePort' })).toContain('providers[0].proxies.service.nodeAddress: required with type NodePort');
    expect(failure({ type: 'ClusterIP', nodeAddress: 'x' })).toContain('providers[0].proxies.service.nodeAddress: only used with type NodePort, not ClusterIP');
    expect(failure({ type: 'ExternalName' })).toContain('providers[0].proxies.service.type:');
    expect(failure({ type: 'ClusterIP', port: 80 })).toContain('providers[0].proxies.service: unknown key "port"');
  });
});
