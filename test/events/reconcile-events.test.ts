/**
 * The causes reconcile gives its instance events, with a recording lifecycle (the real ones are
 * driven in lifecycle-events.test.ts): a move deletes there and creates here, an instance unready
 * too long is replaced (and the next one says so), a create that cannot work is Failed once, and
 * reconciling a Ready proxy again records nothing.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import type { EgressEvent } from '../../src/events/event-sink.ts';
import { MemoryEventStore } from '../../src/events/memory-event-store.ts';
import { ProvisioningError, type ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import type { ReadinessProbe } from '../../src/proxies/readiness-contract.ts';
import { reconcileProxy, type ReconcileDeps } from '../../src/proxies/reconcile.ts';
import { RedisProxyStore } from '../../src/store/redis-proxy-store.ts';
import { uniquePrefix } from '../support/config.ts';
import { RecordingLifecycle } from '../support/recording-lifecycle.ts';

describe('reconcile records why instances come and go', () => {
  let redis: Redis;
  let store: RedisProxyStore;
  const signal = AbortSignal.timeout(60_000);
  const ok: ReadinessProbe = async () => ({ ok: true, egressIp: '192.0.2.1' });
  const down: ReadinessProbe = async () => ({ ok: false, cause: 'refused', message: 'connection refused' });

  beforeAll(() => {
    redis = new Redis(inject('redisUrl'));
    store = new RedisProxyStore(redis, uniquePrefix());
  });
  afterAll(async () => {
    await store.close();
    redis.disconnect();
  });

  function setUp(): { events: MemoryEventStore; deps: (lc: ProxyLifecycle, probe?: ReadinessProbe, now?: () => Date) => ReconcileDeps } {
    const events = new MemoryEventStore({ maxCount: 1000, maxAgeMs: 3_600_000 });
    const sink = events.sink('worker');
    return {
      events,
      deps: (lc, probe = ok, now) => ({
        proxies: store,
        lifecycles: new Map([['local', lc]]),
        fleet: 'test',
        probe,
        readiness: { failureThreshold: 1, successThreshold: 1, replaceAfterMs: 60_000 },
        events: sink,
        ...(now ? { now } : {}),
      }),
    };
  }

  const reasons = async (events: MemoryEventStore, proxy: string): Promise<string[]> =>
    (await events.list({ limit: 100, proxy })).map((e: EgressEvent) => `${e.reason}${e.details?.cause ? `(${String(e.details.cause)})` : ''}`);

  test('a move: the instance there is deleted (move), one is created here (move)', async () => {
    const { events, deps } = setUp();
    const lc = new RecordingLifecycle();
    await store.apply({ metadata: { name: 'mover', labels: {} }, spec: { provider: 'local', placement: 'a' } });
    await reconcileProxy('mover', deps(lc), signal);
    await store.apply({ metadata: { name: 'mover', labels: {} }, spec: { provider: 'local', placement: 'b' } });
    expect((await reconcileProxy('mover', deps(lc), signal)).kind).toBe('ready');
    expect(await reasons(events, 'mover')).toEqual([
      'InstanceCreated(apply)',
      'InstanceStarted',
      'Ready',
      'InstanceDeleted(move)',
      'InstanceCreated(move)',
      'InstanceStarted',
      'Ready',
    ]);
    const [moved] = await events.list({ limit: 1, proxy: 'mover', reason: 'InstanceDeleted' });
    expect(moved?.details).toMatchObject({ provider: 'local', location: 'a' });
    expect(moved?.message).toContain('now on provider "local" at "b"');
  });

  test('unready too long: NotReady, the instance deleted (replace, a Warning), the next one created (replace); reconciling a Ready proxy again records nothing', async () => {
    const { events, deps } = setUp();
    const lc = new RecordingLifecycle();
    await store.apply({ metadata: { name: 'flappy', labels: {} }, spec: { provider: 'local' } });
    await reconcileProxy('flappy', deps(lc), signal);
    await reconcileProxy('flappy', deps(lc), signal);
    const t0 = Date.now();
    await reconcileProxy(
      'flappy',
      deps(lc, down, () => new Date(t0)),
      signal,
    );
    await reconcileProxy(
      'flappy',
      deps(lc, down, () => new Date(t0 + 61_000)),
      signal,
    );
    expect((await reconcileProxy('flappy', deps(lc), signal)).kind).toBe('ready');
    expect(await reasons(events, 'flappy')).toEqual([
      'InstanceCreated(apply)',
      'InstanceStarted',
      'Ready',
      'NotReady(refused)',
      'InstanceDeleted(replace)',
      'InstanceCreated(replace)',
      'InstanceStarted',
      'Ready',
    ]);
    const [replaced] = await events.list({ limit: 1, proxy: 'flappy', reason: 'InstanceDeleted' });
    expect(replaced?.type).toBe('Warning');
  });

  test('a create that cannot work is Failed once, however often it is reconciled', async () => {
    const { events, deps } = setUp();
    const lc = new RecordingLifecycle();
    lc.failNext = new ProvisioningError('quota exceeded for instances');
    await store.apply({ metadata: { name: 'doomed', labels: {} }, spec: { provider: 'local' } });
    await reconcileProxy('doomed', deps(lc), signal);
    await reconcileProxy('doomed', deps(lc), signal);
    const list = await events.list({ limit: 10, proxy: 'doomed' });
    expect(list.map((e) => [e.type, e.reason, e.message])).toEqual([['Warning', 'Failed', 'quota exceeded for instances']]);
  });
});
