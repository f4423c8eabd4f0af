import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { silentLogger } from '../../src/logging.ts';
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

async function collect(it: AsyncIterable<Instance>): Promise<Instance[]> {
  const out: Instance[] = [];
  for await (const i of it) out.push(i);
  return out;
}

describe('kubernetes lifecycle: ensure', () => {
  it('creates a Pod with the owner labels, image, port and credentials as env vars', async () => {
    const lc = lifecycle({ image: 'registry.local/fp:7', port: 8888 });
    const inst = await lc.ensureInstance(spec(), signal());

    const pod = kube.getPod('proxies', 'ep-alpha-1234abcd');
    expect(pod?.metadata.labels).toEqual({ ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'alpha' });
    const container = pod?.spec.containers[0] as unknown as { image: string; ports: { containerPort: number }[]; env: { name: string; value: string }[] };
    expect(container.image).toBe('registry.local/fp:7');
    expect(container.ports[0]?.containerPort).toBe(8888);
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: 'PROXY_USER', value: 'u-alpha' },
        { name: 'PROXY_PASSWORD', value: 's3cret-pw' },
      ]),
    );
    expect(inst).toMatchObject({ name: 'ep-alpha-1234abcd', id: pod?.metadata.uid, state: 'provisioning', placement: 'proxies', owner: { fleet: 'fleet-a', proxy: 'alpha' } });
    expect(inst.endpoint).toBeUndefined();
    expect(Date.parse(inst.createdAt)).not.toBeNaN();
    expect(creates()[0]?.authorization).toBe(`Bearer ${kube.token}`);
  });

  it('is idempotent: a second ensure returns the same Pod after a single create', async () => {
    const lc = lifecycle();
    const a = await lc.ensureInstance(spec(), signal());
    const b = await lc.ensureInstance(spec(), signal());
    expect(b.id).toBe(a.id);
    expect(creates()).toHaveLength(1);
    expect(kube.listPods('proxies')).toHaveLength(1);
  });

  it('adopts the Pod a concurrent ensure created between its read and its create (409 AlreadyExists)', async () => {
    const lc = lifecycle();
    const [a, b] = await Promise.all([lc.ensureInstance(spec(), signal()), lc.ensureInstance(spec(), signal())]);
    expect(a.id).toBe(b.id);
    expect(kube.listPods('proxies')).toHaveLength(1);
    expect(creates().filter((r) => r.status === 201)).toHaveLength(1);
  });

  it('adopts our Pod when the create answers 409 AlreadyExists', async () => {
    const seeded = kube.seedPod({ metadata: { name: 'ep-alpha-1234abcd', namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'alpha' } } });
    // The first read misses it (as a read racing another worker's create would).
    kube.injectFault({ status: 404, match: { method: 'GET', path: '/api/v1/namespaces/proxies/pods/ep-alpha-1234abcd' } });
    const inst = await lifecycle().ensureInstance(spec(), signal());
    expect(inst.id).toBe(seeded.metadata.uid);
    expect(creates().map((r) => r.status)).toEqual([409]);
  });

  it('uses the placement as the namespace', async () => {
    kube.store.namespaces.add('edge');
    const inst = await lifecycle().ensureInstance({ ...spec(), placement: 'edge' }, signal());
    expect(inst.placement).toBe('edge');
    expect(kube.getPod('edge', 'ep-alpha-1234abcd')).toBeDefined();
  });

  it('never logs the credentials', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk, _enc, cb) => void (lines.push(String(chunk)), cb()) });
    const lc = lifecycle({ logger: pino({ level: 'trace' }, sink) });
    await lc.ensureInstance(spec(), signal());
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, signal());
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('')).not.toContain('s3cret-pw');
  });

  it('refuses a Pod of that name without our labels, and one owned by another proxy', async () => {
    kube.seedPod({ metadata: { name: 'ep-alpha-1234abcd', namespace: 'proxies', labels: { app: 'other' } } });
    await expect(lifecycle().ensureInstance(spec(), signal())).rejects.toBeInstanceOf(ProvisioningError);
    kube.seedPod({ metadata: { name: 'ep-beta', namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'beta' } } });
    await expect(lifecycle().ensureInstance(spec('ep-beta'), signal())).rejects.toThrow(/belongs to proxy "beta"/);
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
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, signal());
    expect((await lc.getInstance('ep-alpha-1234abcd', undefined, signal()))?.state).toBe('stopping');
    kube.finishPodDeletion('proxies', 'ep-alpha-1234abcd');
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
      status: { phase: 'Pending', containerStatuses: [{ name: 'proxy', state: { waiting: { reason: 'InvalidImageName', message: 'couldn\'t parse image name "A:B:C"' } } }] },
    });
    expect(await lifecycle().getInstance('ep-i', undefined, signal())).toMatchObject({ state: 'failed', message: expect.stringContaining('InvalidImageName') });
  });

  it('does not see, nor delete, a Pod without our labels', async () => {
    kube.seedPod({ metadata: { name: 'foreign', namespace: 'proxies', labels: { app: 'egress-proxy' } } });
    const lc = lifecycle();
    expect(await lc.getInstance('foreign', undefined, signal())).toBeUndefined();
    await lc.deleteInstance('foreign', undefined, signal());
    expect(kube.getPod('proxies', 'foreign')).toBeDefined();
    expect(kube.requests.filter((r) => r.method === 'DELETE')).toHaveLength(0);
  });
});

describe('kubernetes lifecycle: delete', () => {
  it('deletes the Pod, and deleting a missing one is no error', async () => {
    const lc = lifecycle();
    await lc.ensureInstance(spec(), signal());
    await lc.deleteInstance('ep-alpha-1234abcd', undefined, signal());
    expect(kube.getPod('proxies', 'ep-alpha-1234abcd')).toBeUndefined();
    expect(await lc.getInstance('ep-alpha-1234abcd', undefined, signal())).toBeUndefined();
    await expect(lc.deleteInstance('ep-alpha-1234abcd', undefined, signal())).resolves.toBeUndefined();
  });

  it('treats a 404 from the delete itself (gone in between) as done', async () => {
    const lc = lifecycle();
    await lc.ensureInstance(spec(), signal());
    kube.injectFault({ status: 404, match: { method: 'DELETE' } });
    await expect(lc.deleteInstance('ep-alpha-1234abcd', undefined, signal())).resolves.toBeUndefined();
  });
});

describe('kubernetes lifecycle: inventory', () => {
  it('pages through every page and returns exactly the fleet\'s managed Pods', async () => {
    const mine: string[] = [];
    for (let i = 0; i < 7; i++) {
      const name = `ep-mine-${i}`;
      mine.push(name);
      kube.seedPod({ metadata: { name, namespace: i % 2 ? 'proxies' : 'default', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: `p${i}` } } });
    }
    kube.seedPod({ metadata: { name: 'ep-other-fleet', namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-b', [PROXY_LABEL]: 'x' } } });
    kube.seedPod({ metadata: { name: 'ep-unmanaged', namespace: 'proxies', labels: { [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: 'y' } } });
    kube.seedPod({ metadata: { name: 'ep-no-labels', namespace: 'default' } });

    const found = await collect(lifecycle({ pageSize: 2 }).listInstances('fleet-a', signal()));

    expect(found.map((i) => i.name).sort()).toEqual(mine.sort());
    expect(found.every((i) => i.owner.fleet === 'fleet-a')).toBe(true);
    const lists = kube.requests.filter((r) => r.path === '/api/v1/pods');
    expect(lists.length).toBe(4);
    expect(lists.every((r) => r.query.limit === '2' && r.query.labelSelector === `app=egress-proxy,managed-by=egress-proxies,${FLEET_LABEL}=fleet-a`)).toBe(true);
    expect(lists.slice(1).every((r) => Boolean(r.query.continue))).toBe(true);
  });

  it('fails the sweep with a retryable error when a continue token has expired', async () => {
    for (let i = 0; i < 3; i++) kube.seedPod({ metadata: { name: `ep-${i}`, namespace: 'proxies', labels: { ...MANAGED_LABELS, [FLEET_LABEL]: 'fleet-a', [PROXY_LABEL]: `p${i}` } } });
    const iter = lifecycle({ pageSize: 1 }).listInstances('fleet-a', signal())[Symbol.asyncIterator]();
    expect((await iter.next()).value).toMatchObject({ name: 'ep-0' });
    kube.expireContinueTokens();
    const err = await iter.next().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesRequestError);
    expect(err).toMatchObject({ status: 410, reason: 'Expired', retryable: true });
  });
});

describe('kubernetes lifecycle: errors and cancellation', () => {
  it('maps 422 Invalid on create to ProvisioningError with the server message', async () => {
    const err = await lifecycle().ensureInstance(spec('Bad_Name'), signal()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProvisioningError);
    expect((err as Error).message).toContain('Invalid value: "Bad_Name"');
  });

  it('maps a missing namespace on create to ProvisioningError', async () => {
    await expect(lifecycle().ensureInstance({ ...spec(), placement: 'nowhere' }, signal())).rejects.toBeInstanceOf(ProvisioningError);
  });

  it('maps 403 on create to KubernetesAccessError: not a provisioning failure, not retryable by itself', async () => {
    kube.forbid(kube.token, ['create']);
    const err = await lifecycle().ensureInstance(spec(), signal()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesAccessError);
    expect(err).not.toBeInstanceOf(ProvisioningError);
    expect(err).toMatchObject({ status: 403, retryable: false });
    expect((err as Error).message).toContain('cannot create resource "pods"');
  });

  it('maps a 503 to a retryable KubernetesRequestError', async () => {
    kube.injectFault({ status: 503, match: { method: 'POST' } });
    const err = await lifecycle().ensureInstance(spec(), signal()).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 503, retryable: true });
    expect(err).toBeInstanceOf(KubernetesRequestError);
  });

  it('aborts the HTTP request when the signal ends, rejecting with the signal\'s reason', async () => {
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
