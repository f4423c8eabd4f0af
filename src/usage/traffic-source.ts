/**
 * What the traffic collector (traffic-collector.ts) reads and how it places what it read: the ports
 * live in src/model/traffic.ts, below the providers that implement them (src/providers/traffic-sources.ts)
 * and src/proxies/proxy-resolver.ts, so that src/usage and src/providers import neither.
 */
export type { InstanceTraffic, ProxyPlacement, ProxyResolver, TrafficSource } from '../model/traffic.ts';
