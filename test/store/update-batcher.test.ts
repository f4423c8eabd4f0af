/**
 * The per-object write batcher both stores use (src/store/update-batcher.ts): a write's signal ends
 * only when every caller of its batch gave up, and the listeners it puts on the callers' signals go
 * with the write (a probe loop passes one signal for the life of the process).
 */
import { getEventListeners } from 'node:events';
import { describe, expect, test } from 'vitest';
import { UpdateBatcher } from '../../src/store/update-batcher.ts';

describe('UpdateBatcher', () => {
  test('a long-lived caller signal keeps no listener once its writes are done', async () => {
    const batcher = new UpdateBatcher<number>((_name, updates) => Promise.resolve(updates.map((u) => u(undefined))));
    const signal = new AbortController().signal;
    for (let i = 0; i < 50; i++) expect(await batcher.update('x', () => i, signal)).toBe(i);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  test("a write's signal ends once every caller of its batch has given up, not before", async () => {
    const signals: AbortSignal[] = [];
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const batcher = new UpdateBatcher<number>(async (_name, updates, signal) => {
      signals.push(signal);
      await held;
      return updates.map((u) => u(undefined));
    });
    const a = new AbortController();
    const b = new AbortController();
    // Asked in the same turn: one batch, one write.
    const both = Promise.all([batcher.update('x', () => 1, a.signal), batcher.update('x', () => 2, b.signal)]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(signals).toHaveLength(1);
    a.abort();
    expect(signals[0]?.aborted).toBe(false);
    b.abort();
    expect(signals[0]?.aborted).toBe(true);
    release();
    expect(await both).toEqual([1, 2]);
  });
});
