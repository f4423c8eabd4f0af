/**
 * What the proxy host and its relay processes say over their IPC channel (host-relays.ts,
 * relay-process.ts). A `serve` carries the proxy's listening socket as the message's handle.
 */
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

export interface ServeMessage {
  type: 'serve';
  id: number;
  name: string;
  port: number;
  credentials: ProxyCredentials;
  maxConnections: number;
  localAddress?: string;
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
  | { type: 'denied'; name: string; counts: Record<string, number> };

export function isFromRelay(value: unknown): value is FromRelay {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as Record<string, unknown>;
  return (
    (m.type === 'done' && typeof m.id === 'number') || (m.type === 'denied' && typeof m.name === 'string' && typeof m.counts === 'object' && m.counts !== null)
  );
}

export function isToRelay(value: unknown): value is ToRelay {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as Record<string, unknown>;
  return (m.type === 'serve' || m.type === 'credentials' || m.type === 'stop' || m.type === 'reload') && typeof m.id === 'number' && typeof m.name === 'string';
}
