import { afterAll, describe, expect, test } from 'vitest';
import { ProvisioningError, type Instance, type InstanceSpec, type ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import { instanceNameFor } from '../../src/proxies/instance-name.ts';
import type { ReadinessProbe } from '../../src/proxies/readiness-contract.ts';
import { reconcileProxy, type ReconcileDeps } from '../../src/proxies/reconcile.ts';
import { MemoryProxyStore } from '../../src/store/memory-proxy-store.ts';
import { RecordingLifecycle } from '../support/recording-lifecycle.ts';
import { waitFor } from '../support/wait.ts';

// The store in memory (the ProxyStore conformance suite holds it to the Redis store's rules): no Redis.
describe('reconcileProxy', () => {
  const store = new MemoryProxyStore();
  const signal = AbortSignal.timeout(30_000);
  const okProbe: ReadinessProbe = async () => ({ ok: true, egressIp: '127.0.0.1' });

  afterAll(async () => {
    await store.close();
  });

  const deps = (lifecycle: ProxyLifecycle, probe = okProbe): ReconcileDeps => ({
    proxies: store,
    lifecycles: new Map([['local', lifecycle]]),
    fleet: 'test',
    probe,
  });
  const apply = (name: string) => store.apply({ metadata: { name, labels: {} }, spec: { provider: 'local' } });

  test('create, Ready after the probe; reconciling again (a retry, a duplicate) makes no second instance', async () => {
    const lc = new RecordingLifecycle();
    await apply('a');
    expect(await reconcileProxy('a', deps(lc), signal)).toEqual({ kind: 'ready', url: 'http://127.0.0.1:3001' });
    await Promise.all([reconcileProxy('a', deps(lc), signal), reconcileProxy('a', deps(lc), signal)]);
    expect(lc.creates).toBe(1);
    const proxy = await store.get('a');
    expect(proxy?.status).toMatchObject({
      phase: 'Ready',
      url: 'http://127.0.0.1:3001',
      egressIp: '127.0.0.1',
      observedGeneration: 1,
      instanceName: instanceNameFor('test', proxy!),
    });
  });

  test('an instance still starting, or a failing probe, means look again later', async () => {
    const lc = new RecordingLifecycle();
    lc.startAs = 'provisioning';
    await apply('b');
    expect((await reconcileProxy('b', deps(lc), signal)).kind).toBe('retry-later');
    expect((await store.get('b'))?.status.phase).toBe('Provisioning');
    lc.startAs = 'running';
    lc.instances.clear();
    const failing: ReadinessProbe = async () => ({ ok: false, cause: 'error', message: 'proxy-auth: 407' });
    expect(await reconcileProxy('b', deps(lc, failing), signal)).toEqual({ kind: 'retry-later', why: 'readiness probe failed (1 in a row): proxy-auth: 407' });
    expect((await store.get('b'))?.status).toMatchObject({ phase: 'Provisioning', lastError: 'proxy-auth: 407' });
  });

  test('by default the first failed probe evicts; the same instance returns after --probe-successes passes in a row, a new one after one', async () => {
    const lc = new RecordingLifecycle();
    await apply('r');
    let verdict: 'ok' | 'timeout' = 'ok';
    const probe: ReadinessProbe = async () =>
      verdict === 'ok' ? { ok: true, egressIp: '127.0.0.1' } : { ok: false, cause: 'timeout', message: 'http: no answer within 2000 ms' };
    const events: string[] = [];
    const d: ReconcileDeps = {
      ...deps(lc, probe),
      readiness: { failureThreshold: 1, successThreshold: 2, replaceAfterMs: 60_000 },
      onEvicted: (p, cause) => events.push(`${p} ${cause}`),
    };
    expect((await reconcileProxy('r', d, signal)).kind).toBe('ready');
    verdict = 'timeout';
    expect((await reconcileProxy('r', d, signal)).kind).toBe('retry-later');
    expect((await store.get('r'))?.status).toMatchObject({ phase: 'Provisioning', probeFailures: 1, lastError: 'http: no answer within 2000 ms' });
    expect(events).toEqual(['local timeout']);
    verdict = 'ok';
    expect(await reconcileProxy('r', d, signal)).toEqual({ kind: 'retry-later', why: 'readiness probe passed (1 of 2 in a row needed to return)' });
    expect((await store.get('r'))?.status).toMatchObject({ phase: 'Provisioning', probeSuccesses: 1 });
    // A failure in between starts the count again.
    verdict = 'timeout';
    await reconcileProxy('r', d, signal);
    verdict = 'ok';
    expect((await reconcileProxy('r', d, signal)).kind).toBe('retry-later');
    expect((await reconcileProxy('r', d, signal)).kind).toBe('ready');
    expect((await store.get('r'))?.status.probeSuccesses).toBeUndefined();
    // A new instance (a restarted process) needs one pass.
    verdict = 'timeout';
    await reconcileProxy('r', d, signal);
    lc.instances.clear();
    verdict = 'ok';
    expect((await reconcileProxy('r', d, signal)).kind).toBe('ready');
  });

  test('a Ready proxy stays Ready through fewer than N failed probes, then leaves discovery, then is replaced', async () => {
    const lc = new RecordingLifecycle();
    await apply('h');
    let t = Date.parse('2026-11-01T10:00:00.000Z');
    const events: string[] = [];
    let ok = true;
    const probe: ReadinessProbe = async () => (ok ? { ok: true, egressIp: '127.0.0.1' } : { ok: false, cause: 'refused', message: 'tcp: connection refused' });
    const d: ReconcileDeps = {
      ...deps(lc, probe),
      readiness: { failureThreshold: 3, successThreshold: 1, replaceAfterMs: 60_000 },
      now: () => new Date(t),
      onEvicted: (p, cause) => events.push(`unready ${p} ${cause}`),
      onReplace: (p) => events.push(`replace ${p}`),
    };
    expect((await reconcileProxy('h', d, signal)).kind).toBe('ready');
    const readySince = new Date(t).toISOString();
    expect((await store.get('h'))?.status.conditions).toEqual([
      { type: 'Ready', status: 'True', reason: 'Ready', message: '', lastTransitionTime: readySince },
    ]);
    ok = false;
    for (const expected of [1, 2]) {
      t += 1000;
      await reconcileProxy('h', d, signal);
      expect((await store.get('h'))?.status).toMatchObject({ phase: 'Ready', probeFailures: expected });
      // Still Ready: the condition says the probes are failing but its transition time stays.
      expect((await store.get('h'))?.status.conditions[0]).toEqual({
        type: 'Ready',
        status: 'True',
        reason: 'ProbeFailing',
        message: 'tcp: connection refused',
        lastTransitionTime: readySince,
      });
    }
    await reconcileProxy('h', d, signal);
    expect((await store.get('h'))?.status).toMatchObject({ phase: 'Provisioning', probeFailures: 3, unreadySince: new Date(t).toISOString() });
    expect((await store.get('h'))?.status.conditions[0]).toMatchObject({
      status: 'False',
      reason: 'Provisioning',
      lastTransitionTime: new Date(t).toISOString(),
    });
    expect(events).toEqual(['unready local refused']);
    t += 61_000;
    await reconcileProxy('h', d, signal);
    expect(events).toEqual(['unready local refused', 'replace local']);
    expect(lc.instances.size).toBe(0);
    expect((await store.get('h'))?.status.lastError).toMatch(/^replaced: unready since 2026-11-01T10:00:02.000Z \(tcp: connection refused\)$/);
    ok = true;
    expect((await reconcileProxy('h', d, signal)).kind).toBe('ready');
    expect(lc.creates).toBe(2);
    expect((await store.get('h'))?.status).toMatchObject({ phase: 'Ready', probeFailures: 0 });
    expect((await store.get('h'))?.status.unreadySince).toBeUndefined();
  });

  test('an error a retry cannot fix ends the proxy in Failed with the provider’s message', async () => {
    const lc = new RecordingLifecycle();
    lc.failNext = new ProvisioningError("Quota 'CPUS' exceeded. Limit: 8.0 in region us-central1.");
    await apply('c');
    expect(await reconcileProxy('c', deps(lc), signal)).toEqual({ kind: 'failed', message: "Quota 'CPUS' exceeded. Limit: 8.0 in region us-central1." });
    expect((await store.get('c'))?.status).toMatchObject({ phase: 'Failed', lastError: "Quota 'CPUS' exceeded. Limit: 8.0 in region us-central1." });
    // Failed is final for this generation: a resync does not try the create again...
    lc.failNext = undefined;
    expect((await reconcileProxy('c', deps(lc), signal)).kind).toBe('failed');
    expect(lc.creates).toBe(0);
    // ...a change does.
    await store.apply({ metadata: { name: 'c', labels: { retry: 'yes' } }, spec: { provider: 'local' } });
    expect((await reconcileProxy('c', deps(lc), signal)).kind).toBe('ready');
    expect(lc.creates).toBe(1);
  });

  test('deletion finishes only when the instance is gone; then the proxy and its credentials are forgotten', async () => {
    const lc = new RecordingLifecycle();
    await apply('d');
    await reconcileProxy('d', deps(lc), signal);
    await store.requestDeletion('d');
    lc.deleteTakes = 1;
    expect((await reconcileProxy('d', deps(lc), signal)).kind).toBe('retry-later');
    expect((await store.get('d'))?.status.phase).toBe('Terminating');
    expect(await reconcileProxy('d', deps(lc), signal)).toEqual({ kind: 'deleted' });
    expect(await store.get('d')).toBeUndefined();
    expect(await store.credentials('d')).toBeUndefined();
    expect(lc.instances.size).toBe(0);
    expect(await reconcileProxy('d', deps(lc), signal)).toEqual({ kind: 'gone' });
  });

  test('a provider that cannot host proxies fails the proxy with a message', async () => {
    await store.apply({ metadata: { name: 'e', labels: {} }, spec: { provider: 'elsewhere' } });
    expect(await reconcileProxy('e', deps(new RecordingLifecycle()), signal)).toEqual({
      kind: 'failed',
      message: 'provider "elsewhere" is not configured in this worker or cannot host proxies',
    });
  });

  test('a name the API would refuse (written with kubectl) fails the proxy without reaching the provider', async () => {
    const lc = new RecordingLifecycle();
    await store.apply({ metadata: { name: 'dotted.name', labels: {} }, spec: { provider: 'local' } });
    const message = 'metadata.name: expected a lower-case name of letters, digits and dashes, at most 63 characters, got "dotted.name"';
    expect(await reconcileProxy('dotted.name', deps(lc), signal)).toEqual({ kind: 'failed', message });
    expect(lc.instances.size).toBe(0);
    expect((await store.get('dotted.name'))?.status).toMatchObject({ phase: 'Failed', lastError: message });
  });

  test('a changed placement moves the proxy: the old instance is removed before the new one is made, never both at once', async () => {
    const lc = new RecordingLifecycle();
    await store.apply({ metadata: { name: 'm', labels: {} }, spec: { provider: 'local', placement: 'zone-a' } });
    expect((await reconcileProxy('m', deps(lc), signal)).kind).toBe('ready');
    expect((await store.get('m'))?.status.instanceLocation).toEqual({ provider: 'local', placement: 'zone-a' });
    await store.apply({ metadata: { name: 'm', labels: {} }, spec: { provider: 'local', placement: 'zone-b' } });
    lc.deleteTakes = 1; // the old instance takes a while to go
    const name = instanceNameFor('test', (await store.get('m'))!);
    expect(await reconcileProxy('m', deps(lc), signal)).toEqual({
      kind: 'retry-later',
      why: `moving from provider "local" at "zone-a": instance ${name} there is still being deleted`,
    });
    const moving = await store.get('m');
    expect(moving?.status.phase).toBe('Provisioning');
    expect(moving?.status.url).toBeUndefined();
    expect([...lc.instances.keys()]).toEqual([`zone-a/${name}`]);
    expect((await reconcileProxy('m', deps(lc), signal)).kind).toBe('ready');
    expect([...lc.instances.keys()]).toEqual([`zone-b/${name}`]);
    expect((await store.get('m'))?.status).toMatchObject({
      phase: 'Ready',
      instanceLocation: { provider: 'local', placement: 'zone-b' },
      observedGeneration: 2,
    });
  });

  test('a changed provider moves the proxy between providers; deleting mid-move removes it from both', async () => {
    const a = new RecordingLifecycle();
    const b = new RecordingLifecycle();
    const both: ReconcileDeps = {
      proxies: store,
      lifecycles: new Map([
        ['local', a],
        ['other', b],
      ]),
      fleet: 'test',
      probe: okProbe,
    };
    await apply('n');
    expect((await reconcileProxy('n', both, signal)).kind).toBe('ready');
    await store.apply({ metadata: { name: 'n', labels: {} }, spec: { provider: 'other' } });
    expect((await reconcileProxy('n', both, signal)).kind).toBe('ready');
    expect([a.instances.size, b.instances.size]).toEqual([0, 1]);
    // Back to `local`, but deleted before the move finished: both places are cleaned.
    await store.apply({ metadata: { name: 'n', labels: {} }, spec: { provider: 'local' } });
    b.deleteTakes = 1;
    expect((await reconcileProxy('n', both, signal)).kind).toBe('retry-later');
    await store.requestDeletion('n');
    await a.ensureInstance({
      name: instanceNameFor('test', (await store.get('n'))!),
      owner: { fleet: 'test', proxy: 'n' },
      credentials: { username: 'u', password: 'p' },
    });
    expect(await reconcileProxy('n', both, signal)).toEqual({ kind: 'deleted' });
    expect([a.instances.size, b.instances.size]).toEqual([0, 0]);
  });

  test('a reconcile on an old view (its job taken over while it was frozen, the proxy moved meanwhile) writes no Ready and leaves no instance', async () => {
    // The instance is made only once the test opens the gate: the frozen worker waking up.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const a = new (class extends RecordingLifecycle {
      override async ensureInstance(spec: InstanceSpec): Promise<Instance> {
        await gate;
        return super.ensureInstance(spec);
      }
    })();
    const b = new RecordingLifecycle();
    b.creates = 10; // its instances listen on other ports than a's
    const both: ReconcileDeps = {
      proxies: store,
      lifecycles: new Map<string, ProxyLifecycle>([
        ['local', a],
        ['other', b],
      ]),
      fleet: 'test',
      probe: okProbe,
    };
    await apply('z');
    const frozen = reconcileProxy('z', both, signal);
    await waitFor('the location written before the create', async () => (await store.get('z'))?.status.instanceLocation?.provider === 'local');
    await store.apply({ metadata: { name: 'z', labels: {} }, spec: { provider: 'other' } });
    expect(await reconcileProxy('z', both, signal)).toEqual({ kind: 'ready', url: 'http://127.0.0.1:3011' });
    open();
    expect((await frozen).kind).toBe('retry-later');
    expect([a.instances.size, b.instances.size]).toEqual([0, 1]);
    expect((await store.get('z'))?.status).toMatchObject({
      phase: 'Ready',
      url: 'http://127.0.0.1:3011',
      observedGeneration: 2,
      instanceLocation: { provider: 'other' },
    });
  });

  test('deleting a proxy whose provider is gone from the config keeps it Terminating with the reason; --orphan forgets it', async () => {
    const lc = new RecordingLifecycle();
    await apply('o');
    expect((await reconcileProxy('o', deps(lc), signal)).kind).toBe('ready');
    await store.requestDeletion('o');
    const unconfigured: ReconcileDeps = { proxies: store, lifecycles: new Map(), fleet: 'test', probe: okProbe };
    const outcome = await reconcileProxy('o', unconfigured, signal);
    expect(outcome.kind).toBe('failed');
    expect(outcome).toMatchObject({
      message: expect.stringMatching(/is on provider "local", which is not configured in this worker .* delete the proxy with --orphan/),
    });
    expect((await store.get('o'))?.status).toMatchObject({ phase: 'Terminating', lastError: expect.stringContaining('cannot be removed') });
    expect(lc.instances.size).toBe(1);
    await store.requestDeletion('o', { orphan: true });
    expect(await reconcileProxy('o', unconfigured, signal)).toEqual({ kind: 'deleted' });
    expect(await store.get('o')).toBeUndefined();
    expect(lc.instances.size).toBe(1); // left in place, for GC
  });

  test('instance names are deterministic, bounded and differ per proxy identity', () => {
    const p = { name: 'x'.repeat(80), metadata: { uid: 'u1' } };
    expect(instanceNameFor('f', p)).toBe(instanceNameFor('f', p));
    expect(instanceNameFor('f', p)).toHaveLength(63);
    expect(instanceNameFor('f', p)).not.toBe(instanceNameFor('f', { ...p, metadata: { uid: 'u2' } }));
    expect(instanceNameFor('f', p)).not.toBe(instanceNameFor('g', p));
    expect(instanceNameFor('f', { name: 'web', metadata: { uid: 'u' } })).toMatch(/^ep-web-[0-9a-f]{8}$/);
  });
});
