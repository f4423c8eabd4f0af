/** The wait between polls of a Compute operation: it ends with the signal's own reason, and leaves no listener on a job's signal. */
import { getEventListeners } from 'node:events';
import { expect, test } from 'vitest';
import { abortableDelay } from '../../src/providers/gcp/lifecycle-calls.ts';

test('each wait removes its listener from the signal when it ends, so a long poll does not gather them', async () => {
  const signal = new AbortController().signal;
  for (let i = 0; i < 20; i++) await abortableDelay(1, signal);
  expect(getEventListeners(signal, 'abort')).toHaveLength(0);
});

test("an ended signal ends the wait with the signal's reason", async () => {
  const controller = new AbortController();
  const reason = new Error('job cancelled');
  const waiting = abortableDelay(60_000, controller.signal);
  controller.abort(reason);
  await expect(waiting).rejects.toBe(reason);
  await expect(abortableDelay(0, controller.signal)).rejects.toBe(reason);
});
