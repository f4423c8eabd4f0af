/**
 * Instance lives from a real reconcile's events (recording lifecycle): InstanceCreated starts a
 * life with the proxy's pool, the provider's machine type and the placement; InstanceDeleted ends
 * it. A usage store that fails never fails nor delays the event: it is logged and counted.
 */
import pino from 'pino';
import { describe, expect, test } from 'vitest';
import { MemoryEventStore } from '../../src/events/memory-event-store.ts';
import { reconcileProxy, type ReconcileDeps } from '../../src/proxies/reconcile.ts';
import { MemoryProxyStore } from '../../src/store/memory-proxy-store.ts';
import { recordingLives } from '../../src/events/usage-lives.ts';
import { instanceKinds, machineTypeOf } from '../../src/usage/machine-types.ts';
import { MemoryUsageStore } from '../../src/usage/memory-usage-store.ts';
import type { InstanceLifeRecorder } from '../../src/usage/usage-store.ts';
import { RecordingLifecycle } from '../support/recording-lifecycle.ts';

const logger = pino({ level: 'silent' });
const kinds = instanceKinds([{ name: 'cloud', type: 'gcp', zone: 'europe-west1-b', proxies: { machineType: 'e2-small' } }]);

function setUp(lives: InstanceLifeRecorder, clock: { ms: number }) {
  const proxies = new MemoryProxyStore();
  const events = new MemoryEventStore({ maxCount: 1000, maxAgeMs: 3_600_000 });
  const failures: string[] = [];
  const sink = recordingLives(events.sink('worker'), {
    lives,
    proxies,
    kinds,
    logger,
    now: () => clock.ms,
    onFailure: (what, reason) => failures.push(`${what}:${reason}`),
  });
  const lc = new RecordingLifecycle();
  const deps: ReconcileDeps = {
    proxies,
    lifecycles: new Map([['cloud', lc]]),
    fleet: 'test',
    probe: async () => ({ ok: true, egressIp: '192.0.2.1' }),
    readiness: { failureThreshold: 1, successThreshold: 1, replaceAfterMs: 60_000 },
    events: sink,
  };
  return { proxies, events, sink, deps, failures };
}

describe('instance lives from the lifecycle events', () => {
  test("a reconcile's created and deleted instance is one life of the pool, provider and machine type", async () => {
    const clock = { ms: Date.parse('2026-11-01T10:00:00Z') };
    const usage = new MemoryUsageStore({ now: () => clock.ms });
    const { proxies, sink, deps } = setUp(usage, clock);
    const signal = AbortSignal.timeout(30_000);
    await proxies.apply({ metadata: { name: 'm1', labels: { 'egress-proxies.io/pool': 'crawl' } }, spec: { provider: 'cloud', placement: 'us-east1-c' } });
    expect((await reconcileProxy('m1', deps, signal)).kind).toBe('ready');
    await sink.settled();
    const [running] = await usage.runningInstances();
    expect(running).toMatchObject({
      proxy: 'm1',
      pool: 'crawl',
      provider: 'cloud',
      location: 'us-east1-c',
      machineType: 'e2-small',
      startedAt: '2026-11-01T10:00:00.000Z',
    });
    clock.ms += 2 * 3_600_000;
    await proxies.requestDeletion('m1');
    for (let i = 0; i < 5 && (await reconcileProxy('m1', deps, signal)).kind !== 'deleted'; i++);
    await sink.settled();
    expect(await usage.runningInstances()).toEqual([]);
    const report = await usage.query({ from: new Date('2026-11-01T00:00:00Z'), to: new Date('2026-11-02T00:00:00Z'), groupBy: 'pool' });
    expect(report.rows.map((r) => [r.key, r.instanceSeconds, r.instances])).toEqual([['crawl', 7200, 1]]);
  });

  test('a usage store that fails leaves the events alone, logged and counted', async () => {
    const clock = { ms: Date.now() };
    const broken: InstanceLifeRecorder = {
      instanceStarted: () => Promise.reject(new Error('connection is closed')),
      instanceEnded: () => new Promise(() => undefined),
    };
    const { proxies, events, sink, deps, failures } = setUp(broken, clock);
    await proxies.apply({ metadata: { name: 'm2', labels: {} }, spec: { provider: 'cloud' } });
    expect((await reconcileProxy('m2', deps, AbortSignal.timeout(30_000))).kind).toBe('ready');
    await sink.settled();
    expect(failures).toEqual(['start:error']);
    expect((await events.list({ limit: 10, proxy: 'm2' })).map((e) => e.reason)).toContain('InstanceCreated');
  });
});

describe('the order of one instance’s writes', () => {
  test('a delete that follows its create at once waits for the create’s write (whose pool read is slow)', async () => {
    let clockMs = Date.parse('2026-11-01T10:00:00Z');
    const usage = new MemoryUsageStore({ now: () => clockMs });
    // An earlier life of the same name, ended: a delete written before the create would be taken for its repeat.
    await usage.instanceStarted({ instance: 'i', proxy: 'p', provider: 'cloud', location: 'z', machineType: 'm', startedAt: '2026-11-01T08:00:00.000Z' });
    await usage.instanceEnded('cloud', 'i', '2026-11-01T09:00:00.000Z');
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const proxies = { get: async () => (await gate, undefined) };
    const events = new MemoryEventStore({ maxCount: 100, maxAgeMs: 3_600_000 });
    const sink = recordingLives(events.sink('worker'), { lives: usage, proxies, kinds, logger, now: () => clockMs });
    const event = (reason: 'InstanceCreated' | 'InstanceDeleted') =>
      ({ type: 'Normal', reason, object: { kind: 'Proxy', name: 'p' }, provider: 'cloud', message: reason, details: { instance: 'i' } }) as const;
    sink.record(event('InstanceCreated'));
    clockMs += 60_000;
    sink.record(event('InstanceDeleted'));
    release();
    await sink.settled();
    expect(await usage.runningInstances()).toEqual([]);
    const r = await usage.query({ from: new Date('2026-11-01T00:00:00Z'), to: new Date('2026-11-02T00:00:00Z'), groupBy: 'provider' });
    expect(r.totals).toMatchObject({ instanceSeconds: 3600 + 60, instances: 2 });
  });
});

describe('machine types', () => {
  test.each([
    [{ name: 'g', type: 'gcp', proxies: { machineType: 'e2-micro' } }, 'e2-micro'],
    [{ name: 'g', type: 'gcp', proxies: { instanceTemplate: 'global/instanceTemplates/proxy-v2' } }, 'template/proxy-v2'],
    [{ name: 'g', type: 'gcp' }, 'default'],
    [{ name: 'k', type: 'kvm', proxies: { vcpus: 2, memoryMiB: 512 } }, '2cpu-512mib'],
    [{ name: 'k', type: 'kubernetes' }, 'pod'],
    [{ name: 'l', type: 'local' }, 'local'],
    [{ name: 'u', type: 'upstream' }, 'upstream'],
  ])('%j → %s', (provider, machineType) => {
    expect(machineTypeOf(provider)).toBe(machineType);
  });
});
