/**
 * The job boundary's retry decision (queues/retry.ts) over every shape of error a handler may throw:
 * what decides between "fail the job now", "retry with backoff" and "look again later". What BullMQ
 * then does with each is in test/workers/job-boundary.test.ts. Written for the mutation run
 * (docs/testing.md#mutation-testing).
 */
import { describe, expect, test } from 'vitest';
import { LookAgainLater, retryVerdict } from '../../queues/retry.ts';
import { DeadlineError, EgressError } from '../../src/errors.ts';

const withData = (data: Record<string, unknown>, cause?: unknown): Error =>
  Object.assign(new Error('handler failed', cause === undefined ? {} : { cause }), data);

describe('retryVerdict', () => {
  test('an error that says nothing, or something that is not an Error, is retried', () => {
    expect(retryVerdict(new Error('plain'))).toEqual({ kind: 'retry' });
    expect(retryVerdict('a string')).toEqual({ kind: 'retry' });
    expect(retryVerdict(undefined)).toEqual({ kind: 'retry' });
  });

  test('retryable false is final, true is a retry, on the error itself', () => {
    expect(retryVerdict(new EgressError('ERR_X', 'forbidden', { retryable: false }))).toEqual({ kind: 'final' });
    expect(retryVerdict(new DeadlineError('late'))).toEqual({ kind: 'retry' });
    expect(retryVerdict(withData({ retryable: false }))).toEqual({ kind: 'final' });
  });

  test('an EgressError, or a subclass, that states no flag is retried; its cause may still say final', () => {
    class ForgotTheFlag extends EgressError {
      constructor() {
        super('ERR_FORGOT', 'a new error class without a retryable flag');
      }
    }
    expect(new ForgotTheFlag().retryable).toBeUndefined();
    expect(retryVerdict(new ForgotTheFlag())).toEqual({ kind: 'retry' });
    expect(retryVerdict(new EgressError('ERR_X', 'says nothing'))).toEqual({ kind: 'retry' });
    expect(retryVerdict(new EgressError('ERR_X', 'wraps a final one', { cause: new EgressError('ERR_Y', 'forbidden', { retryable: false }) }))).toEqual({
      kind: 'final',
    });
  });

  test('the nearest flag down the cause chain decides', () => {
    expect(retryVerdict(new Error('wrapper', { cause: new EgressError('ERR_X', 'forbidden', { retryable: false }) }))).toEqual({ kind: 'final' });
    expect(retryVerdict(withData({ retryable: true }, new EgressError('ERR_X', 'forbidden', { retryable: false })))).toEqual({ kind: 'retry' });
    expect(retryVerdict(new Error('a', { cause: new Error('b', { cause: withData({ retryable: false }) }) }))).toEqual({ kind: 'final' });
  });

  test('a flag that is not a boolean is no verdict: the chain goes on', () => {
    expect(retryVerdict(withData({ retryable: 'no' }, new EgressError('ERR_X', 'forbidden', { retryable: false })))).toEqual({ kind: 'final' });
    expect(retryVerdict(withData({ retryable: 0 }))).toEqual({ kind: 'retry' });
  });

  test('retryAfterMs asks to look again later, before any flag of the same error, and 0 is a valid delay', () => {
    expect(retryVerdict(new LookAgainLater(2000, 'still provisioning'))).toEqual({ kind: 'later', delayMs: 2000 });
    expect(retryVerdict(withData({ retryAfterMs: 0, retryable: false }))).toEqual({ kind: 'later', delayMs: 0 });
    expect(retryVerdict(new Error('wrapper', { cause: new LookAgainLater(500, 'x') }))).toEqual({ kind: 'later', delayMs: 500 });
  });

  test('a retryAfterMs that is negative, not finite or not a number is ignored', () => {
    expect(retryVerdict(withData({ retryAfterMs: -1, retryable: false }))).toEqual({ kind: 'final' });
    expect(retryVerdict(withData({ retryAfterMs: Number.POSITIVE_INFINITY, retryable: false }))).toEqual({ kind: 'final' });
    expect(retryVerdict(withData({ retryAfterMs: Number.NaN }))).toEqual({ kind: 'retry' });
    expect(retryVerdict(withData({ retryAfterMs: '100', retryable: false }))).toEqual({ kind: 'final' });
  });

  test('the chain is read at most ten deep; a deeper flag is not seen', () => {
    let deep: Error = withData({ retryable: false });
    for (let i = 0; i < 9; i++) deep = new Error(`level ${i}`, { cause: deep });
    expect(retryVerdict(deep)).toEqual({ kind: 'final' });
    expect(retryVerdict(new Error('one more', { cause: deep }))).toEqual({ kind: 'retry' });
  });

  test('a cycle in the cause chain ends', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as Error & { cause: unknown }).cause = b;
    expect(retryVerdict(a)).toEqual({ kind: 'retry' });
  });

  test('LookAgainLater is a retryable, coded error naming the delay and why', () => {
    const e = new LookAgainLater(1500, 'pool not settled');
    expect(e).toBeInstanceOf(Error);
    expect(e).toMatchObject({
      name: 'LookAgainLater',
      code: 'ERR_LOOK_AGAIN_LATER',
      retryable: true,
      retryAfterMs: 1500,
      message: 'look again in 1500 ms: pool not settled',
    });
  });
});
