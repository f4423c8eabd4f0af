import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { silentLogger } from '../../src/logging.ts';
import { ObserverResourceError, observerFailure } from '../../src/observer-errors.ts';
import { ExitWatch } from '../../src/providers/local/exit-watch.ts';
import { MemoryProbeClaims } from '../../src/readiness/probe-claims.ts';
import { ProbeLoop } from '../../src/readiness/probe-loop.ts';
import { MemoryProxyStore } from '../../src/store/memory-proxy-store.ts';

/**
 * EMFILE, ENFILE and ENOMEM seen by the observer (this process ran out of descriptors or memory
 * while looking at a proxy) are the observer's failure: no exit is reported, no probe failure is
 * recorded, nothing leaves discovery; the look is counted and tried again.
 */

const emfile = (): Error => Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });

describe('the observer out of its own resources', () => {
  test('EMFILE, ENFILE and ENOMEM (also as a cause) are typed as the observer’s; other errors are not', () => {
    expect(observerFailure('probe', emfile())).toBeInstanceOf(ObserverResourceError);
    expect(observerFailure('probe', new Error('wrapped', { cause: Object.assign(new Error('x'), { code: 'ENFILE' }) }))).toMatchObject({
      code: 'ERR_OBSERVER_RESOURCES',
      resource: 'ENFILE',
      retryable: true,
    });
    expect(observerFailure('probe', Object.assign(new Error('y'), { code: 'ECONNREFUSED' }))).toBeUndefined();
  });

  test('the exit watch reports no exit when it cannot read /proc for want of descriptors, and says so', async () => {
    const exits: string[] = [];
    let errors = 0;
    let seen: () => void = () => undefined;
    const three = new Promise<void>((resolve) => (seen = resolve));
    const watch = new ExitWatch({
      pollMs: 10,
      confirmEvery: 1,
      onObserverError: () => {
        if (++errors === 3) seen();
      },
    });
    watch.subscribe((exit) => exits.push(exit.name));
    // A live pid (ours), whose /proc entry cannot be read: the observer's failure, not an exit.
    watch.watch({
      name: 'p',
      owner: { fleet: 'f', proxy: 'p' },
      id: '1',
      pid: process.pid,
      isOurs: () => Promise.reject(new ObserverResourceError('reading /proc', 'EMFILE', { cause: emfile() })),
      exitMessage: 'proxy host exited',
    });
    await three;
    watch.close();
    expect(exits).toEqual([]);
  });

  describe('the probe loop', () => {
    // The store and the probe claims in memory: no Redis.
    const store = new MemoryProxyStore();
    beforeAll(async () => {
      await store.apply({ metadata: { name: 'p', labels: {} }, spec: { provider: 'local' } });
      await store.updateStatus('p', (p) => ({ ...p.status, phase: 'Ready', url: 'http://127.0.0.1:9', instanceId: 'i-1' }));
    });
    afterAll(async () => {
      await store.close();
    });

    test('records no failure and evicts nothing when its probes fail for want of its own descriptors', async () => {
      const requested: string[] = [];
      const counted: string[] = [];
      const loop = new ProbeLoop({
        proxies: store,
        claims: new MemoryProbeClaims(),
        intervalMs: 100,
        rules: { failureThreshold: 1, successThreshold: 1 },
        probe: () => Promise.reject(new ObserverResourceError('readiness probe', 'EMFILE', { cause: emfile() })),
        requestReconcile: async (name) => void requested.push(name),
        hooks: { onObserverError: (where, code) => counted.push(`${where}:${code}`) },
        logger: silentLogger(),
      });
      let seen: () => void = () => undefined;
      const three = new Promise<void>((resolve) => (seen = resolve));
      let n = 0;
      loop.on('observerError', () => ++n === 3 && seen());
      loop.start();
      try {
        await three;
      } finally {
        await loop.close();
      }
      expect(requested).toEqual([]);
      expect(counted.slice(0, 3)).toEqual(['probe:EMFILE', 'probe:EMFILE', 'probe:EMFILE']);
      expect((await store.get('p'))?.status).toMatchObject({ phase: 'Ready' });
      expect((await store.get('p'))?.status.probeFailures ?? 0).toBe(0);
    });
  });
});
