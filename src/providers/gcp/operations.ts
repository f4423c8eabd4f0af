/**
 * The end of a Compute Engine operation, written once: wait until it is DONE (a zone's or the
 * global `operations.wait`), then read whether it ended with an error. An insert, start, resume,
 * setMetadata or delete of an instance (lifecycle.ts) and a change of the firewall rule
 * (firewall.ts) all finish this way.
 */
import { awaitOperation, type Operation } from './lifecycle-calls.ts';
import { GcpRequestError, operationErrorText } from './lifecycle-errors.ts';

/** How a finished operation failed: the API's first error code, every error as one text, and its HTTP status. */
export interface OperationFailure {
  code: string | undefined;
  text: string;
  status: number | undefined;
}

/**
 * Waits for `op` (polled through `wait`, at least `pollMs` apart) and answers how it failed, or
 * undefined when it succeeded. A wait that fails throws `mapWaitError(err)`.
 */
export async function operationFailure(
  op: Operation,
  wait: (name: string, signal: AbortSignal) => Promise<Operation>,
  pollMs: number,
  signal: AbortSignal,
  mapWaitError: (err: unknown) => unknown,
): Promise<OperationFailure | undefined> {
  let done: Operation;
  try {
    done = await awaitOperation(op, wait, pollMs, signal);
  } catch (err) {
    throw mapWaitError(err);
  }
  if (!done.error) return undefined;
  const { code, text } = operationErrorText(done.error);
  return { code, text, status: done.httpErrorStatusCode ?? undefined };
}

/** The failure as a (retryable) GcpRequestError about `what`. */
export function failedOperation(what: string, failure: OperationFailure): GcpRequestError {
  return new GcpRequestError(`${what}: ${failure.text}`, failure.status, failure.code);
}
