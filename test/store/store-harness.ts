/** What the store conformance suites share: a harness per implementation, and the stores a test made, closed after it. */
import type { KubeConfig } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, inject } from 'vitest';
import type { CustomResourceDefinition } from '../../src/crds/definitions.ts';
import { startFakeKubeApiserver, type FakeKubeApiserver } from '../fakes/kube-apiserver/index.ts';
import { uniquePrefix } from '../support/config.ts';

export interface StoreHarness<S extends { close(): Promise<void> }> {
  name: string;
  setUp(): Promise<void>;
  tearDown(): Promise<void>;
  /** A new, empty store of its own. */
  make(): Promise<S>;
}

/** Registers the harness's hooks in the current describe; returns `make`, whose stores are closed after each test. */
export function useStores<S extends { close(): Promise<void> }>(h: StoreHarness<S>): () => Promise<S> {
  const stores: S[] = [];
  beforeAll(() => h.setUp());
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
  });
  afterAll(() => h.tearDown());
  return async () => {
    const s = await h.make();
    stores.push(s);
    return s;
  };
}

/** A harness whose stores live in the run's Redis, each under a prefix of its own. */
export function redisStoreHarness<S extends { close(): Promise<void> }>(make: (redis: Redis, prefix: string) => S): StoreHarness<S> {
  let redis: Redis;
  return {
    name: 'redis',
    setUp: async () => {
      redis = new Redis(inject('redisUrl'));
    },
    tearDown: async () => {
      await redis.quit();
    },
    make: async () => make(redis, uniquePrefix()),
  };
}

/** A harness whose stores live in this process's memory, each new one empty. */
export function memoryStoreHarness<S extends { close(): Promise<void> }>(make: () => S): StoreHarness<S> {
  return { name: 'memory', setUp: async () => undefined, tearDown: async () => undefined, make: async () => make() };
}

/** A harness whose stores each talk to a fake kube-apiserver of their own, with `crd` registered. */
export function kubernetesStoreHarness<S extends { close(): Promise<void> }>(crd: CustomResourceDefinition, make: (kc: KubeConfig) => S): StoreHarness<S> {
  const fakes: FakeKubeApiserver[] = [];
  return {
    name: 'kubernetes',
    setUp: async () => undefined,
    tearDown: async () => {
      for (const fake of fakes.splice(0)) await fake.close();
    },
    make: async () => {
      const fake = await startFakeKubeApiserver();
      fakes.push(fake);
      fake.registerCrd(crd);
      return make(fake.kubeConfig());
    },
  };
}
