import { EgressError } from '../errors.ts';

/** An awaited check failed, or its job is gone. */
export class CheckFailedError extends EgressError {
  constructor(jobId: string, reason: string) {
    super('ERR_CHECK_FAILED', `check job ${jobId} failed: ${reason}`);
  }
}

/** An awaited check did not finish before its wait ended. */
export class CheckWaitTimeoutError extends EgressError {
  constructor(jobId: string, cause: unknown) {
    super('ERR_CHECK_WAIT_TIMEOUT', `check job ${jobId} did not finish in time (are workers running for the checks queue?)`, {
      retryable: true,
      cause,
    });
  }
}
