import { EgressError } from '../../errors.ts';

/** An endpoint list or password file that cannot be read or understood: nothing is created or deleted from it. */
export class UpstreamEndpointsError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_UPSTREAM_ENDPOINTS', message, { ...options, retryable: true });
  }
}
