/**
 * What the traffic collector (traffic-collector.ts) reads and how it places what it read: ports,
 * implemented where the counts and the proxies are (src/providers/traffic-sources.ts over the
 * local-type providers' instance files, src/proxies/remote-traffic.ts over the remote proxies'
 * own reports, src/proxies/proxy-resolver.ts over the proxy store), so
 * that src/usage imports neither. No I/O here.
 */
import type { TrafficCounts } from './usage-types.ts';

/** What one instance carried since its source was last read, by destination domain (only domains that grew). */
export interface InstanceTraffic {
  /** The instance's provider-side name. */
  instance: string;
  /** The proxy the instance's own records name, when they do. */
  proxy: string | undefined;
  domains: Map<string, TrafficCounts>;
}

/** One provider's proxies: each `read` answers what grew since the previous `read` (a proxy restarted counts from zero). */
export interface TrafficSource {
  provider: string;
  read: () => Promise<InstanceTraffic[]>;
  /** Called once the usage store took everything read so far: a source that keeps its progress (on disk) records it. */
  commit?: () => Promise<void>;
}

/** Which proxy an instance serves and the pool that proxy is a member of. */
export interface ProxyPlacement {
  proxy: string;
  /** The proxy's `egress-proxies.io/pool` label, when it is a pool member. */
  pool?: string;
}

/** Undefined when no proxy of the store has that instance (a proxy deleted since, another fleet's). Never rejects. */
export type ProxyResolver = (instance: string, signal?: AbortSignal) => Promise<ProxyPlacement | undefined>;
