/**
 * GC reads "no Proxy owns this instance" as "delete it": so a Proxy list that is not complete and
 * well-formed must delete nothing. With `--store kubernetes` the list comes from the API server,
 * which may page it (`continue`) or, broken or hostile, answer without `items` or repeat a token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyCrd } from '../../src/crds/definitions.ts';
import { API_GROUP, API_VERSION } from '../../src/crds/resources.ts';
import { silentLogger } from '../../src/logging.ts';
import { sweepProvider } from '../../src/proxies/gc.ts';
import { instanceNameFor } from '../../src/proxies/instance-name.ts';
import { KubernetesStoreError } from '../../src/store/kubernetes/errors.ts';
import { KubernetesProxyStore } from '../../src/store/kubernetes/proxy-store.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { ForeignInstanceError, type ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { ListingPagesError } from '../../src/clients/page-bound.ts';
import { RecordingLifecycle } from '../support/recording-lifecycle.ts';

const FLEET = 'gc-inventory';
const LIST_PATH = /\/apis\/egress-proxies\.io\/v1alpha1\/namespaces\/default\/proxies$/;

describe('GC against a Proxy list that is not whole', () => {
  let kube: FakeKubeApiserver;
  let store: KubernetesProxyStore;
  let lifecycle: RecordingLifecycle;
  let raw: unknown[];

  beforeAll(async () => {
    kube = await startFakeKubeApiserver();
    kube.registerCrd(proxyCrd());
    store = new KubernetesProxyStore(kube.kubeConfig(), 'default');
    lifecycle = new RecordingLifecycle();
    const signal = AbortSignal.timeout(20_000);
    for (const name of ['alpha', 'beta', 'gamma']) {
      await store.apply({ metadata: { name, labels: {} }, spec: { provider: 'local' } }, signal);
      const proxy = await store.get(name, signal);
      if (!proxy) throw new Error(`${name} was not stored`);
      // Each proxy's instance, old enough to be collected if no proxy owned it.
      await lifecycle.ensureInstance({
        name: instanceNameFor(FLEET, proxy),
        owner: { fleet: FLEET, proxy: name },
        credentials: { username: 'u', password: 'p' },
      });
    }
    for (const i of lifecycle.instances.values()) i.createdAt = '2020-01-01T00:00:00Z';
    raw = kube.listObjects(API_GROUP, API_VERSION, 'proxies', 'default');
    expect(raw).toHaveLength(3);
  });
  afterAll(async () => {
    await store.close();
    await kube.close();
  });

  const sweep = () => sweepProvider('local', lifecycle, { proxies: store, fleet: FLEET, graceMs: 60_000, logger: silentLogger() }, AbortSignal.timeout(20_000));
  const list = (items: unknown, continueToken?: string) => ({
    kind: 'ProxyList',
    apiVersion: `${API_GROUP}/${API_VERSION}`,
    metadata: { resourceVersion: '1', ...(continueToken === undefined ? {} : { continue: continueToken }) },
    ...(items === undefined ? {} : { items }),
  });

  it('a whole list keeps every owned instance', async () => {
    const result = await sweep();
    expect(result).toMatchObject({ seen: 3, kept: 3, deleted: [] });
  });

  it('an answer without items fails the sweep and deletes nothing', async () => {
    kube.injectFault({ match: { method: 'GET', path: LIST_PATH }, body: list(undefined) });
    const err = await sweep().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesStoreError);
    expect((err as Error).message).toMatch(/the answer has no items list; nothing is concluded from an incomplete list$/);
    expect(lifecycle.instances.size).toBe(3);
  });

  it('a paged list is followed to its end: proxies on the second page keep their instances', async () => {
    kube.injectFault({ match: { method: 'GET', path: LIST_PATH }, body: list(raw.slice(0, 1), 'page-2') });
    kube.injectFault({ match: { method: 'GET', path: LIST_PATH }, body: list(raw.slice(1)) });
    const before = kube.requests.length;
    const result = await sweep();
    expect(result).toMatchObject({ seen: 3, kept: 3, deleted: [] });
    const lists = kube.requests.slice(before).filter((r) => r.method === 'GET' && LIST_PATH.test(r.path));
    expect(lists.map((r) => r.query.continue)).toEqual([undefined, 'page-2']);
    expect(lifecycle.instances.size).toBe(3);
  });

  it('a continue token that repeats fails the sweep and deletes nothing', async () => {
    kube.injectFault({ match: { method: 'GET', path: LIST_PATH }, body: list(raw.slice(0, 1), 'again') });
    kube.injectFault({ match: { method: 'GET', path: LIST_PATH }, body: list(raw.slice(1, 2), 'again') });
    const err = await sweep().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ListingPagesError);
    expect((err as Error).message).toContain('the server sent the same page token twice ("again")');
    expect(lifecycle.instances.size).toBe(3);
  });

  it('an instance the inventory calls this fleet’s, which the read before its delete shows is not, is left alone, counted and reported', async () => {
    const events: { reason: string; message: string }[] = [];
    const foreign = { name: 'ep-gone-0000beef', id: 'x', state: 'running' as const, owner: { fleet: FLEET, proxy: 'gone' }, createdAt: '2020-01-01T00:00:00Z' };
    const liar: ProxyLifecycle = {
      ensureInstance: (spec) => lifecycle.ensureInstance(spec),
      getInstance: (name) => lifecycle.getInstance(name),
      async deleteInstance(name, _placement, target) {
        expect(target).toEqual({ owner: foreign.owner, nameIsOurs: false });
        throw new ForeignInstanceError(name, 'domain on host "h": it belongs to fleet "another-fleet", not "gc-inventory"');
      },
      async *listInstances() {
        yield* lifecycle.instances.values();
        yield foreign;
      },
    };
    const result = await sweepProvider(
      'local',
      liar,
      { proxies: store, fleet: FLEET, graceMs: 60_000, logger: silentLogger(), events: { record: (e) => void events.push(e) } },
      AbortSignal.timeout(20_000),
    );
    expect(result).toMatchObject({ seen: 4, kept: 3, deleted: [], refused: 1 });
    expect(events.map((e) => e.reason)).toEqual(['GcRefused', 'GcSweep']);
    expect(events[0]?.message).toContain('it belongs to fleet "another-fleet"');
    expect(events[1]?.message).toContain('1 refused (not ours when read again)');
  });
});
