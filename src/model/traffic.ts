/*
 * Traffic as the data plane counts it and the worker reads it (docs/usage.md#traffic): the counts,
 * the bound's overflow domain, and the ports the traffic collector reads through. Here, below
 * both the providers that count and src/usage that stores, so that neither imports the other.
 * No I/O here.
 */

/** Traffic through proxies: payload bytes each way, plain HTTP requests, tunnels (CONNECT and SOCKS5). */
export interface TrafficCounts {
  /** Client → destination (request bodies, the client's side of tunnels). */
  bytesUp: number;
  /** Destination → client (response bodies, the destination's side of tunnels). */
  bytesDown: number;
  requests: number;
  tunnels: number;
}

/** The destination domain of traffic past the bound of distinct domains kept. */
export const OTHER_DOMAIN = 'other';

export function emptyTraffic(): TrafficCounts {
  return { bytesUp: 0, bytesDown: 0, requests: 0, tunnels: 0 };
}

export function addTraffic(into: TrafficCounts, more: TrafficCounts): TrafficCounts {
  into.bytesUp += more.bytesUp;
  into.bytesDown += more.bytesDown;
  into.requests += more.requests;
  into.tunnels += more.tunnels;
  return into;
}

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
