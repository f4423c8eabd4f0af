import { EgressError } from '../../errors.ts';

/** A local instance could not be started or stopped; retrying may help. */
export class LocalInstanceError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_LOCAL_INSTANCE', message, { ...options, retryable: true });
  }
}
