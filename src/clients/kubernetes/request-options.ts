import {
  createConfiguration,
  Observable,
  wrapHttpLibrary,
  type ConfigurationOptions,
  type HttpLibrary,
  type ObservableMiddleware,
} from '@kubernetes/client-node';
import { withSpan } from '../../telemetry/spans.ts';

/** client-node's own HTTP library (node-fetch 2), as every call would use it. */
const fetchLibrary = createConfiguration().httpApi;

/**
 * `base` with a span per HTTP call (`kubernetes GET`): method, server, path and status.
 * Never the query string, headers or body: the Authorization header and object contents stay out.
 */
export const tracedHttp = (base: HttpLibrary): HttpLibrary =>
  wrapHttpLibrary({
    send(ctx) {
      const url = new URL(ctx.getUrl());
      const method = String(ctx.getHttpMethod());
      return withSpan(
        `kubernetes ${method}`,
        {
          'http.request.method': method,
          'server.address': url.hostname,
          'server.port': Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
          'url.path': url.pathname,
        },
        async (span) => {
          const response = await base.send(ctx).toPromise();
          span.setAttribute('http.response.status_code', response.httpStatusCode);
          if (response.httpStatusCode >= 400) span.setAttribute('error.type', String(response.httpStatusCode));
          return response;
        },
      );
    },
  });

const tracedLibrary = tracedHttp(fetchLibrary);

/**
 * Per-call options that make client-node 1.4 abort the HTTP request when `signal` ends, and trace it.
 *
 * client-node 1.x sends through node-fetch 2, which honours `RequestContext.getSignal()`; the generated
 * API methods accept per-call `ConfigurationOptions`, whose middleware runs after authentication and
 * before sending. An appended middleware that calls `setSignal` therefore reaches node-fetch, which
 * destroys the socket on abort. The per-call `httpApi` wraps the default library in a span.
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
    httpApi: tracedLibrary,
    ...options,
    middleware: [...(options.middleware ?? []), setSignal],
    middlewareMergeStrategy: 'append',
  };
}

export { raceAbort } from '../../abort.ts';
