import type { Logger } from '../logging.ts';
import { POOL_LABEL } from '../model/pool-resource.ts';
import type { ProxyReader } from '../store/proxy-store.ts';
import type { ProxyPlacement, ProxyResolver } from '../model/traffic.ts';
import { instanceNameFor } from './instance-name.ts';

/**
 * Which proxy an instance serves and the pool that proxy is a member of, for the traffic metric
 * and the traffic collector (docs/usage.md#traffic). Instances are named from their proxy
 * (`instanceNameFor(fleet, proxy)`, src/proxies/instance-name.ts), so one listing of the proxy
 * store gives every instance's proxy and pool; the listing is kept and read again at most every
 * `refreshMs` (an instance it does not know waits for the next), and a failed listing keeps the last one.
 */
export type { ProxyPlacement, ProxyResolver };

export interface ProxyResolverOptions {
  reader: Pick<ProxyReader, 'list'>;
  /** The installation's fleet id (fleetOf(prefix)), as the reconcile names instances with it. */
  fleet: string;
  refreshMs?: number;
  logger?: Logger;
}

export const PROXY_RESOLVER_REFRESH_MS = 5_000;

export function createProxyResolver(options: ProxyResolverOptions): ProxyResolver {
  const refreshMs = options.refreshMs ?? PROXY_RESOLVER_REFRESH_MS;
  let byInstance = new Map<string, ProxyPlacement>();
  let listedAt = -Infinity;
  let listing: Promise<void> | undefined;
  const refresh = (signal: AbortSignal | undefined): Promise<void> =>
    (listing ??= options.reader
      .list(signal)
      .then(
        (proxies) => {
          const next = new Map<string, ProxyPlacement>();
          for (const p of proxies) {
            const pool = p.labels[POOL_LABEL];
            next.set(instanceNameFor(options.fleet, p), pool !== undefined ? { proxy: p.name, pool } : { proxy: p.name });
          }
          byInstance = next;
        },
        (err: unknown) => options.logger?.warn({ err: (err as Error).message }, 'could not list the proxies to place traffic by pool; the last listing stays'),
      )
      .finally(() => {
        listedAt = performance.now();
        listing = undefined;
      }));
  return async (instance, signal) => {
    const known = byInstance.get(instance);
    if (performance.now() - listedAt >= refreshMs) await refresh(signal);
    else if (known) return known;
    return byInstance.get(instance);
  };
}
