import { EgressError } from './errors.ts';

/** Error codes that say this process ran out of something of its own: descriptors (EMFILE, ENFILE) or memory (ENOMEM). */
const RESOURCE_CODES: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'ENOMEM']);

/**
 * A look at a proxy (a readiness probe, the proxy host's pid in /proc, its control socket) could
 * not be made because the observing process itself is out of descriptors or memory. It is the
 * observer's failure, not the proxy's: it never evicts a proxy nor marks it failed; the look is
 * simply tried again (`retryable`). `resource` is the system's code.
 */
export class ObserverResourceError extends EgressError {
  readonly resource: string;
  /** What was being looked at when it failed (`readiness probe`, `/proc`, `proxy host socket`). */
  readonly where: string;
  constructor(where: string, resource: string, options: { cause?: unknown } = {}) {
    super('ERR_OBSERVER_RESOURCES', `${where}: this process is out of resources (${resource}); nothing was concluded about the proxy`, {
      ...options,
      retryable: true,
    });
    this.resource = resource;
    this.where = where;
  }
}

/** The system code when `err` (or an error in its cause chain) is EMFILE, ENFILE or ENOMEM. */
export function resourceCodeOf(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof ObserverResourceError) return e.resource;
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== undefined && RESOURCE_CODES.has(code)) return code;
  }
  return undefined;
}

/** `err` as an ObserverResourceError when it is one of the observer's own resource errors, else undefined. */
export function observerFailure(where: string, err: unknown): ObserverResourceError | undefined {
  if (err instanceof ObserverResourceError) return err;
  const code = resourceCodeOf(err);
  return code === undefined ? undefined : new ObserverResourceError(where, code, { cause: err });
}
