/**
 * The provider conformance suite: the properties of the Provider and ProxyLifecycle ports
 * (src/providers/types.ts, src/providers/lifecycle.ts) that every provider must keep, written
 * once and run over every provider against its backend (`describe.each`): local on this
 * machine, kvm on the real test host, kubernetes and gcp on their fakes through the real
 * clients. A harness per provider (conformance-harnesses.ts) builds the provider the production
 * way and looks at its backend; the properties never name a provider.
 *
 * What a provider does beyond the ports (its reasons, its wire calls, its crash recovery) stays
 * in its own test files.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_MESSAGE } from '../../src/health/message.ts';
import type { ProviderType } from '../../src/providers/config.ts';
import { ForeignInstanceError, type Instance, type InstanceSpec, type ProxyLifecycle } from '../../src/providers/lifecycle.ts';
import type { Provider } from '../../src/providers/types.ts';
import { waitFor } from '../support/wait.ts';

export interface ProviderHarness {
  readonly type: ProviderType;
  /** The targets a check of `provider()` reports on, in order. */
  readonly targets: readonly string[];
  setUp(): Promise<void>;
  beforeEach(): Promise<void>;
  /** Removes every instance and backend object the test made, and closes the providers built. */
  afterEach(): Promise<void>;
  tearDown(): Promise<void>;
  /** A provider with a healthy backend that hosts proxies, built from parsed configuration. */
  provider(): Promise<Provider>;
  /** A provider whose check fails with a message longer than MAX_MESSAGE characters. */
  longMessageProvider(): Promise<Provider>;
  /** A name no other test of this run uses, valid as an instance name on every provider. */
  uniqueName(what: string): string;
  /** Where instances go when the provider has a choice (a KVM host); undefined for the default. */
  readonly placement: string | undefined;
  /** The backend objects that make up instance `name` (pods, secrets, domains, volumes, processes), one line each. */
  backendObjects(name: string): Promise<string[]>;
  /** Makes a backend object named `name` that does not carry the owner identity (someone else's). */
  seedForeign(name: string): Promise<void>;
  foreignExists(name: string): Promise<boolean>;
  /** Requests the backend has received so far, where the harness can count them (a fake's request log, dials). */
  requests?(): Promise<number>;
  /** Writes (anything but reads) the backend has received so far, where the harness can tell them apart. */
  writes?(): number;
}

const signal = (): AbortSignal => AbortSignal.timeout(60_000);

async function collect(iterable: AsyncIterable<Instance>): Promise<Instance[]> {
  const out: Instance[] = [];
  for await (const i of iterable) out.push(i);
  return out;
}

function lifecycleOf(p: Provider): ProxyLifecycle {
  if (!p.lifecycle) throw new Error(`provider ${p.name} hosts no proxies: the harness must configure them`);
  return p.lifecycle;
}

function spec(h: ProviderHarness, name: string, fleet: string): InstanceSpec {
  return {
    name,
    owner: { fleet, proxy: `proxy-${name}` },
    credentials: { username: `u-${name}`.slice(0, 32), password: 'conformance-secret-pw' },
    ...(h.placement === undefined ? {} : { placement: h.placement }),
  };
}

export function providerConformance(harnesses: readonly ProviderHarness[]): void {
  describe.each(harnesses)('$type provider conformance', (h) => {
    beforeAll(() => h.setUp());
    beforeEach(() => h.beforeEach());
    afterEach(() => h.afterEach());
    afterAll(() => h.tearDown());

    describe('health check', () => {
      it('reports one result per target, in the order of targets(), Ready with reason Ok on a healthy backend', async () => {
        const p = await h.provider();
        expect(p.type).toBe(h.type);
        expect(p.targets()).toEqual(h.targets);
        const results = await p.check(signal());
        expect(results.map((r) => [r.target, r.ready, r.reason])).toEqual(h.targets.map((t) => [t, true, 'Ok']));
        for (const r of results) {
          expect(r.message.length).toBeGreaterThan(0);
          expect(r.durationSeconds).toBeGreaterThanOrEqual(0);
        }
      });

      it(`truncates a message to ${MAX_MESSAGE} characters`, async () => {
        const p = await h.longMessageProvider();
        const results = await p.check(signal());
        expect(results.map((r) => r.target)).toEqual(h.targets);
        for (const r of results) {
          expect(r.ready).toBe(false);
          expect(r.reason).not.toBe('Timeout');
          // The harness makes the underlying message longer than the limit: cut to exactly it, marked.
          expect(Array.from(r.message)).toHaveLength(MAX_MESSAGE);
          expect(r.message.endsWith('…')).toBe(true);
        }
      });

      it('reports Timeout on every target once the signal has ended, not what the backend would have said', async () => {
        for (const p of [await h.provider(), await h.longMessageProvider()]) {
          const ended = new AbortController();
          ended.abort(new Error('job deadline'));
          const results = await p.check(ended.signal);
          expect(results.map((r) => [r.target, r.ready, r.reason])).toEqual(h.targets.map((t) => [t, false, 'Timeout']));
          for (const r of results) expect(Array.from(r.message).length).toBeLessThanOrEqual(MAX_MESSAGE);
        }
      });

      it('close is idempotent, and a closed provider reports Error on every target without reaching its backend', async () => {
        const p = await h.provider();
        expect((await p.check(signal())).every((r) => r.ready)).toBe(true);
        await p.close();
        await expect(p.close()).resolves.toBeUndefined();
        const before = await h.requests?.();
        const results = await p.check(signal());
        expect(results.map((r) => [r.target, r.ready, r.reason])).toEqual(h.targets.map((t) => [t, false, 'Error']));
        if (before !== undefined) expect(await h.requests?.()).toBe(before);
      });
    });

    describe('proxy lifecycle', () => {
      it('ensure is idempotent: concurrent and repeated ensures of one spec give one instance, and a repeat writes nothing', async () => {
        const lc = lifecycleOf(await h.provider());
        const fleet = h.uniqueName('fleet');
        const s = spec(h, h.uniqueName('idem'), fleet);
        const [a, b] = await Promise.all([lc.ensureInstance(s, signal()), lc.ensureInstance(s, signal())]);
        expect(a).toMatchObject({ name: s.name, owner: s.owner });
        expect(b.id).toBe(a.id);
        const objects = await h.backendObjects(s.name);
        expect(objects.length).toBeGreaterThan(0);
        const writes = h.writes?.();

        const again = await lc.ensureInstance(s, signal());
        expect(again).toMatchObject({ id: a.id, name: s.name, owner: s.owner, createdAt: a.createdAt });
        expect(again.endpoint).toEqual(a.endpoint);
        expect(await h.backendObjects(s.name)).toEqual(objects);
        if (writes !== undefined) expect(h.writes?.()).toBe(writes);
        expect((await collect(lc.listInstances(fleet, signal()))).map((i) => [i.name, i.id])).toEqual([[s.name, a.id]]);
      });

      it('a foreign instance (without the owner identity) is neither seen, listed nor deleted', async () => {
        const lc = lifecycleOf(await h.provider());
        const fleet = h.uniqueName('fleet');
        const ours = spec(h, h.uniqueName('ours'), fleet);
        await lc.ensureInstance(ours, signal());
        const foreign = h.uniqueName('foreign');
        await h.seedForeign(foreign);
        const writes = h.writes?.();

        expect(await lc.getInstance(foreign, h.placement, signal())).toBeUndefined();
        expect((await collect(lc.listInstances(fleet, signal()))).map((i) => i.name)).toEqual([ours.name]);
        // A delete naming it, even as this fleet's, reads it first and leaves it (ForeignInstanceError where it carries nothing of ours).
        const refused = await lc.deleteInstance(foreign, h.placement, { owner: { fleet, proxy: `proxy-${foreign}` }, nameIsOurs: true }, signal()).then(
          () => undefined,
          (e: unknown) => e,
        );
        if (refused !== undefined) expect(refused).toBeInstanceOf(ForeignInstanceError);
        expect(await h.foreignExists(foreign)).toBe(true);
        if (writes !== undefined) expect(h.writes?.()).toBe(writes);
      });

      it('a delete re-checks the whole owner on the object: another fleet’s or another proxy’s instance is left running (ForeignInstanceError)', async () => {
        const lc = lifecycleOf(await h.provider());
        const fleet = h.uniqueName('fleet');
        const s = spec(h, h.uniqueName('owned'), fleet);
        const made = await lc.ensureInstance(s, signal());
        for (const owner of [
          { fleet: h.uniqueName('other-fleet'), proxy: s.owner.proxy },
          { fleet, proxy: `${s.owner.proxy}-other` },
        ]) {
          for (const nameIsOurs of [false, true]) {
            const err = await lc.deleteInstance(s.name, h.placement, { owner, nameIsOurs }, signal()).catch((e: unknown) => e);
            expect(err).toBeInstanceOf(ForeignInstanceError);
            expect((err as Error).message).toContain(owner.fleet === fleet ? `belongs to proxy "${s.owner.proxy}"` : `belongs to fleet "${fleet}"`);
          }
        }
        expect(await lc.getInstance(s.name, h.placement, signal())).toMatchObject({ id: made.id, owner: s.owner });
        // Its own owner, as an inventory would name it (nameIsOurs false), deletes it.
        // (Called again while parts remain, as a reconcile does: a kubernetes Secret goes after its Pod.)
        await waitFor(
          'the instance to be gone',
          async () => {
            await lc.deleteInstance(s.name, h.placement, { owner: s.owner, nameIsOurs: false }, signal());
            return (await lc.getInstance(s.name, h.placement, signal())) === undefined;
          },
          60_000,
        );
      });

      it('listing keeps to the fleet: another fleet’s instances are not listed', async () => {
        const lc = lifecycleOf(await h.provider());
        const [fleetA, fleetB, fleetC] = [h.uniqueName('fleet'), h.uniqueName('fleet'), h.uniqueName('fleet')];
        const a = spec(h, h.uniqueName('a'), fleetA);
        const b = spec(h, h.uniqueName('b'), fleetB);
        await lc.ensureInstance(a, signal());
        await lc.ensureInstance(b, signal());

        const listedA = await collect(lc.listInstances(fleetA, signal()));
        expect(listedA.map((i) => [i.name, i.owner])).toEqual([[a.name, a.owner]]);
        const listedB = await collect(lc.listInstances(fleetB, signal()));
        expect(listedB.map((i) => [i.name, i.owner])).toEqual([[b.name, b.owner]]);
        expect(await collect(lc.listInstances(fleetC, signal()))).toEqual([]);
        if (h.placement !== undefined) expect([...listedA, ...listedB].map((i) => i.placement)).toEqual([h.placement, h.placement]);
      });
    });
  });
}
