import { Observable, type ConfigurationOptions, type ObservableMiddleware } from '@kubernetes/client-node';

/**
 * Per-call options that make client-node 1.4 abort the HTTP request when `signal` ends.
 *
 * client-node 1.x sends through node-fetch 2, which honours `RequestContext.getSignal()`; the generated
 * API methods accept per-call `ConfigurationOptions`, whose middleware runs after authentication and
 * before sending. An appended middleware that calls `setSignal` therefore reaches node-fetch, which
 * destroys the socket on abort.
 */
export function withSignal(signal: AbortSignal, options: ConfigurationOptions = {}): ConfigurationOptions {
  const setSignal: ObservableMiddleware = {
    pre: (ctx) => {
      ctx.setSignal(signal);
      return new Observable(Promise.resolve(ctx));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
  return {
    ...options,
    middleware: [...(options.middleware ?? []), setSignal],
    middlewareMergeStrategy: 'append',
  };
}

/**
 * Settles with `work`, or rejects with the signal's reason as soon as the signal ends (a late rejection of
 * `work` is then ignored). For the parts of a call that the signal cannot abort.
 */
export async function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  work.catch(() => undefined);
  signal.throwIfAborted();
  let onAbort = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
