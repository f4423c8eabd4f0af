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

export { raceAbort } from '../../abort.ts';
