/**
 * What the traffic collector (traffic-collector.ts) reads and how it places what it read: the ports
 * live in src/model/traffic.ts, below what implements them (src/providers/traffic-sources.ts over
 * the local-type providers' instance files, src/proxies/remote-traffic.ts over the remote proxies'
 * own reports, src/proxies/proxy-resolver.ts over the proxy store), so that src/usage and
 * src/providers import neither.
 */
export type { InstanceTraffic, ProxyPlacement, ProxyResolver, TrafficSource } from '../model/traffic.ts';
