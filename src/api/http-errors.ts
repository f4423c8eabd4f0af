import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { EgressError } from '../errors.ts';
import type { Logger } from '../logging.ts';
import { storeUnavailableResponse } from './store-unavailable.ts';

/** A request the server cannot act on: answered 400 with a message. */
export class BadRequestError extends EgressError {
  constructor(message: string) {
    super('ERR_BAD_REQUEST', message);
  }
}

const STATUS_BY_CODE: Record<string, ContentfulStatusCode> = {
  ERR_BAD_REQUEST: 400,
  ERR_JOB_DATA: 400,
  ERR_NOT_FOUND: 404,
  ERR_JOB_AMBIGUOUS: 409,
  ERR_JOB_NOT_FAILED: 409,
  ERR_INVALID_PROXY: 400,
  ERR_PROXY_TERMINATING: 409,
  ERR_INVALID_POOL: 400,
  ERR_POOL_TERMINATING: 409,
  ERR_CHECK_FAILED: 502,
  ERR_CHECK_WAIT_TIMEOUT: 504,
  ERR_USAGE_WINDOW: 400,
};

export interface ErrorContext {
  logger: Logger;
  /** True while Redis is connected; an unexpected error while it is not is answered 503. */
  storeConnected: () => boolean;
}

/**
 * Every error becomes JSON `{error, message}`; never a stack trace. A client that went away
 * mid-request (an upload cut short) is one debug line: there is nobody to answer.
 */
export function errorResponse(err: Error, c: Context, { logger, storeConnected }: ErrorContext): Response {
  if (c.req.raw.signal.aborted) {
    logger.debug({ method: c.req.method, path: c.req.path.slice(0, 200), err: err.message }, 'client went away mid-request');
    return c.json({ error: 'ERR_CLIENT_GONE', message: 'the client closed the connection' }, 400);
  }
  if (err instanceof HTTPException) return c.json({ error: 'HTTPError', message: err.message }, err.status);
  // A store wait that ran out (a read's or the pick cache's deadline, a fenced write Redis refused):
  // the store's fault, not ours nor the client's.
  if (err instanceof EgressError && (err.code === 'ERR_STORE_UNAVAILABLE' || err.code === 'ERR_DEADLINE')) {
    logger.warn({ code: err.code, err: err.message }, 'request failed: the store did not answer in time');
    return storeUnavailableResponse(
      c,
      err.code === 'ERR_DEADLINE' ? `the store did not answer in time (${err.message}): Redis is unreachable or overloaded` : err.message,
    );
  }
  if (err instanceof EgressError) {
    const status = STATUS_BY_CODE[err.code] ?? 500;
    if (status >= 500) logger.warn({ code: err.code, err: err.message }, 'request failed');
    const errors = (err as { errors?: unknown }).errors;
    return c.json({ error: err.code, message: err.message, ...(Array.isArray(errors) ? { errors } : {}) }, status);
  }
  if (!storeConnected()) {
    logger.warn({ err: err.message }, 'request failed while Redis is unreachable');
    return storeUnavailableResponse(c, 'Redis is unreachable; try again');
  }
  logger.error({ err: err.message, stack: err.stack }, 'unexpected error serving a request');
  return c.json({ error: 'Internal', message: 'internal error; see the server log' }, 500);
}
