/** Without an exporting SDK the project's spans cost nothing: the work runs with a span that records nothing, and nothing is made active. */
import { trace } from '@opentelemetry/api';
import { expect, test } from 'vitest';
import { recordSpan, withSpan } from '../../src/telemetry/spans.ts';

test('withSpan runs its work with a span that records nothing, and recordSpan returns one', async () => {
  const seen = await withSpan('check', { 'egress.provider': 'local' }, async (span) => ({ recording: span.isRecording(), active: trace.getActiveSpan() }));
  expect(seen).toEqual({ recording: false, active: undefined });
  expect(recordSpan('check target', {}, 0, 1).isRecording()).toBe(false);
});

test('what the work throws passes through unchanged', async () => {
  const err = new Error('checker failed');
  await expect(withSpan('check', {}, () => Promise.reject(err))).rejects.toBe(err);
});
