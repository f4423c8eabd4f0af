import { describe, expect, it } from 'vitest';
import type { Operation } from '../../src/providers/gcp/lifecycle-calls.ts';
import { GcpRequestError } from '../../src/providers/gcp/lifecycle-errors.ts';
import { failedOperation, operationFailure } from '../../src/providers/gcp/operations.ts';

const signal = (): AbortSignal => AbortSignal.timeout(10_000);
/** A `wait` that answers the operations in turn, one a call. */
const answers = (...ops: Operation[]) => {
  const asked: string[] = [];
  const wait = (name: string): Promise<Operation> => {
    asked.push(name);
    const next = ops.shift();
    return next ? Promise.resolve(next) : Promise.reject(new Error('asked once too often'));
  };
  return { wait, asked };
};

describe('operationFailure: the end of a Compute Engine operation', () => {
  it('waits until DONE and answers nothing when it succeeded', async () => {
    const { wait, asked } = answers({ name: 'op-1', status: 'RUNNING' }, { name: 'op-1', status: 'DONE' });
    expect(await operationFailure({ name: 'op-1', status: 'PENDING' }, wait, 0, signal(), (err) => err)).toBeUndefined();
    expect(asked).toEqual(['op-1', 'op-1']);
  });

  it('an operation DONE with an error answers its code, every error as one text, and its HTTP status', async () => {
    const done: Operation = {
      name: 'op-2',
      status: 'DONE',
      httpErrorStatusCode: 403,
      error: {
        errors: [
          { code: 'QUOTA_EXCEEDED', message: 'no CPUs left' },
          { code: 'OTHER', message: 'and more' },
        ],
      },
    };
    const failure = await operationFailure(done, answers().wait, 0, signal(), (err) => err);
    expect(failure).toEqual({ code: 'QUOTA_EXCEEDED', text: 'QUOTA_EXCEEDED: no CPUs left; OTHER: and more', status: 403 });
    const error = failedOperation('deleting instance "p1"', failure!);
    expect(error).toBeInstanceOf(GcpRequestError);
    expect(error.message).toBe('deleting instance "p1": QUOTA_EXCEEDED: no CPUs left; OTHER: and more');
  });

  it('a wait that fails throws what mapWaitError makes of it', async () => {
    const mapped = new Error('mapped');
    await expect(operationFailure({ name: 'op-3', status: 'RUNNING' }, answers().wait, 0, signal(), () => mapped)).rejects.toBe(mapped);
  });
});
