import { describe, expect, test } from 'vitest';
import { CheckFailedError, CheckWaitTimeoutError } from '../../src/checks/check-errors.ts';
import type { CheckResultData } from '../../src/health/check-result.ts';
import { MemoryWorkRequests } from '../../src/work/memory-work-requests.ts';

const result = (checkJobId: string): CheckResultData => ({ provider: 'local', checkJobId, checkedAt: new Date(0).toISOString(), targets: [] });

// The in-memory work-requests port keeps the promises of the BullMQ one: requests in order, an
// awaited check ends with its result, its failure, or the caller's signal.
describe('MemoryWorkRequests', () => {
  test('records every request in order, and next() resolves for one made later', async () => {
    const work = new MemoryWorkRequests();
    await work.reconcileProxy('a');
    const later = work.next((r) => r.kind === 'look-at-pool');
    await work.reconcilePool('web');
    await work.lookAtPool('web', 5_000);
    expect(await later).toEqual({ kind: 'look-at-pool', pool: 'web', delayMs: 5_000 });
    expect(work.proxyReconciles()).toEqual(['a']);
    expect(work.poolReconciles()).toEqual(['web']);
  });

  test('an awaited check gets its result, whether it finished before or after the wait began', async () => {
    const work = new MemoryWorkRequests();
    const early = await work.checkProvider('local');
    work.finishCheck(early, result(early));
    expect(await work.awaitCheck(early, new AbortController().signal)).toEqual(result(early));
    const late = await work.checkProvider('local');
    expect(late).not.toBe(early);
    const waiting = work.awaitCheck(late, new AbortController().signal);
    work.finishCheck(late, result(late));
    expect(await waiting).toEqual(result(late));
  });

  test('a failed check rejects with CheckFailedError, an ended wait with CheckWaitTimeoutError', async () => {
    const work = new MemoryWorkRequests();
    const failed = await work.checkProvider('local');
    const waiting = work.awaitCheck(failed, new AbortController().signal);
    work.failCheck(failed, 'boom');
    await expect(waiting).rejects.toBeInstanceOf(CheckFailedError);
    const never = await work.checkProvider('local');
    const controller = new AbortController();
    const abandoned = work.awaitCheck(never, controller.signal);
    controller.abort(new Error('gave up'));
    await expect(abandoned).rejects.toMatchObject({ code: 'ERR_CHECK_WAIT_TIMEOUT' });
    await expect(work.awaitCheck(never, AbortSignal.abort())).rejects.toBeInstanceOf(CheckWaitTimeoutError);
  });

  test('a failing port rejects requests and records none until it recovers', async () => {
    const work = new MemoryWorkRequests();
    work.fail(new Error('queue unreachable'));
    await expect(work.reconcileProxy('a')).rejects.toThrow('queue unreachable');
    work.fail(undefined);
    await work.reconcileProxy('b');
    expect(work.proxyReconciles()).toEqual(['b']);
  });
});
