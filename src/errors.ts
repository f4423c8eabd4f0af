/**
 * Typed errors with stable codes. Whether an operation may be retried is data on the
 * error (`retryable`), never a pattern matched against a message. One classifier reads it,
 * `retryVerdict` (queues/retry.ts), and its default is stated once there: an error that says
 * nothing is retried.
 */
export interface EgressErrorOptions {
  cause?: unknown;
  /**
   * True: a retry may succeed; false: it cannot (a 403, bad input). Absent: the error says
   * nothing, and its cause chain or the classifier's default (retried) decides.
   */
  retryable?: boolean;
}

export class EgressError extends Error {
  readonly code: string;
  readonly retryable: boolean | undefined;

  constructor(code: string, message: string, options: EgressErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable;
  }
}

/** Bad configuration: a file, a field or a flag (final: a retry reads the same configuration). `path` names it (`providers[1].hosts[0].port`). */
export class ConfigError extends EgressError {
  readonly path: string;
  constructor(path: string, message: string, options: EgressErrorOptions = {}) {
    super('ERR_CONFIG', path ? `${path}: ${message}` : message, { retryable: false, ...options });
    this.path = path;
  }
}

/** Bad command-line usage: an unknown flag, a missing argument. */
export class UsageError extends EgressError {
  constructor(message: string, options: EgressErrorOptions = {}) {
    super('ERR_USAGE', message, { retryable: false, ...options });
  }
}

/** An operation ran past its deadline. */
export class DeadlineError extends EgressError {
  constructor(message: string, options: EgressErrorOptions = {}) {
    super('ERR_DEADLINE', message, { retryable: true, ...options });
  }
}

/** A named thing does not exist (provider, job, proxy). */
export class NotFoundError extends EgressError {
  constructor(what: string, name: string, options: EgressErrorOptions = {}) {
    super('ERR_NOT_FOUND', `${what} "${name}" not found`, { retryable: false, ...options });
  }
}

/** Turns anything thrown into an Error, keeping the original as `cause`. */
export function toError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : JSON.stringify(value), { cause: value });
}

/** The first error of the given class in a cause chain. */
export function findCause<T extends Error>(value: unknown, cls: abstract new (...args: never[]) => T): T | undefined {
  for (let e: unknown = value, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof cls) return e;
  }
  return undefined;
}
