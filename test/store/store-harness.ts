/** What the store conformance suites share: a harness per implementation, and the stores a test made, closed after it. */
import { afterAll, afterEach, beforeAll } from 'vitest';

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
