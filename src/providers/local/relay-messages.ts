/**
 * What the proxy host and its relay processes say over their IPC channel (host-relays.ts,
 * relay-process.ts). A `serve` carries the proxy's listening socket as the message's handle.
 */
import type { TrafficCounts } from '../../model/traffic.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

export interface ServeMessage {
  type: 'serve';
  id: number;
  name: string;
  port: number;
  credentials: ProxyCredentials;
  maxConnections: number;
  localAddress?: string;
  /** Distinct destination domains to count the proxy's traffic by (traffic-stats.ts); 0: accounting is off. */
  trafficDomains: number;
}

export type ToRelay =
  | ServeMessage
  | { type: 'credentials'; id: number; name: string; credentials: ProxyCredentials }
  | { type: 'stop'; id: number; name: string }
  /** The host's policy changed: read it again now (name is ''). */
  | { type: 'reload'; id: number; name: string };

export type FromRelay =
  /** The relay carried out message `id` (`error`: it could not). */
  | { type: 'done'; id: number; error?: string }
  /** Refusals of one proxy since the last such message, by reason. */
  | { type: 'denied'; name: string; counts: Record<string, number> }
  /** Traffic of one proxy since the last such message, by destination domain. */
  | { type: 'traffic'; name: string; domains: Record<string, TrafficCounts> };

export function isFromRelay(value: unknown): value is FromRelay {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as Record<string, unknown>;
  if (m.type === 'done') return typeof m.id === 'number';
  if (m.type === 'denied') return typeof m.name === 'string' && typeof m.counts === 'object' && m.counts !== null;
  return m.type === 'traffic' && typeof m.name === 'string' && typeof m.domains === 'object' && m.domains !== null;
}

export function isToRelay(value: unknown): value is ToRelay {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as Record<string, unknown>;
  return (m.type === 'serve' || m.type === 'credentials' || m.type === 'stop' || m.type === 'reload') && typeof m.id === 'number' && typeof m.name === 'string';
}
