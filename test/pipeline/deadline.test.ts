import { getEventListeners, once } from 'node:events';
import { describe, expect, test } from 'vitest';
import { SharedDeadlines } from '../../src/abort.ts';
import { DeadlineError } from '../../src/errors.ts';

describe('SharedDeadlines(ms, granularity)', () => {
  test('operations starting within one window share a signal; the next window gets its own', () => {
    let now = 1000;
    const deadlines = new SharedDeadlines(60_000, 50, () => now);
    const first = deadlines.signal();
    now += 49;
    expect(deadlines.signal()).toBe(first);
    now += 1;
    const second = deadlines.signal();
    expect(second).not.toBe(first);
    expect(first.aborted || second.aborted).toBe(false);
  });

  test('a window ends with a DeadlineError naming the deadline, and many may listen to it without a warning', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      const signal = new SharedDeadlines(5, 5).signal();
      for (let i = 0; i < 50; i++) signal.addEventListener('abort', () => undefined, { once: true });
      await once(signal, 'abort');
      expect(signal.reason).toBeInstanceOf(DeadlineError);
      expect((signal.reason as DeadlineError).message).toBe('deadline of 5 ms passed');
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  test('with a parent: a window ends with the parent, passing its reason on; one made after the parent ended is ended at once', () => {
    const parent = new AbortController();
    let now = 0;
    const deadlines = new SharedDeadlines(60_000, 50, () => now, parent.signal);
    const window = deadlines.signal();
    parent.abort('shutdown');
    expect(window.aborted).toBe(true);
    expect(window.reason).toBe('shutdown');
    now += 50;
    const later = deadlines.signal();
    expect(later).not.toBe(window);
    expect(later.reason).toBe('shutdown');
  });

  test('a window that ended by its deadline no longer listens to the parent', async () => {
    const parent = new AbortController();
    const window = new SharedDeadlines(1, 1, undefined, parent.signal).signal();
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(1);
    await once(window, 'abort');
    expect(window.reason).toBeInstanceOf(DeadlineError);
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(0);
  });
});
