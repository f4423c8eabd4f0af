import { parseRange, type Range } from './addresses.ts';

/** Why a destination is refused: a stable string, in the 403's body and the metric's `reason` label. */
export type DenyReason =
  | 'unspecified'
  | 'loopback'
  | 'metadata'
  | 'link-local'
  | 'private'
  | 'unique-local'
  | 'cgnat'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'guarded-listener'
  | 'denied-range'
  | 'unresolvable';

/** Every reason, for documentation and tests. */
export const DENY_REASONS: readonly DenyReason[] = [
  'unspecified',
  'loopback',
  'metadata',
  'link-local',
  'private',
  'unique-local',
  'cgnat',
  'multicast',
  'broadcast',
  'reserved',
  'guarded-listener',
  'denied-range',
  'unresolvable',
];

/**
 * The ranges a proxy refuses unless `allow` opens them, first match wins (so the metadata
 * addresses are reported as `metadata`, not as the link-local or CGNAT range around them).
 * IPv6 forms that embed an IPv4 address are judged by that address (addresses.ts).
 */
export const DEFAULT_DENIED: ReadonlyArray<{ cidr: string; reason: DenyReason }> = [
  { cidr: '0.0.0.0/8', reason: 'unspecified' },
  { cidr: '::/128', reason: 'unspecified' },
  { cidr: '127.0.0.0/8', reason: 'loopback' },
  { cidr: '::1/128', reason: 'loopback' },
  { cidr: '169.254.169.254/32', reason: 'metadata' },
  { cidr: 'fd00:ec2::254/128', reason: 'metadata' },
  { cidr: '100.100.100.200/32', reason: 'metadata' },
  { cidr: '169.254.0.0/16', reason: 'link-local' },
  { cidr: 'fe80::/10', reason: 'link-local' },
  { cidr: '10.0.0.0/8', reason: 'private' },
  { cidr: '172.16.0.0/12', reason: 'private' },
  { cidr: '192.168.0.0/16', reason: 'private' },
  { cidr: '64:ff9b:1::/48', reason: 'private' },
  { cidr: 'fec0::/10', reason: 'private' },
  { cidr: 'fc00::/7', reason: 'unique-local' },
  { cidr: '100.64.0.0/10', reason: 'cgnat' },
  { cidr: '224.0.0.0/4', reason: 'multicast' },
  { cidr: 'ff00::/8', reason: 'multicast' },
  { cidr: '255.255.255.255/32', reason: 'broadcast' },
  { cidr: '240.0.0.0/4', reason: 'reserved' },
];

export const DEFAULT_DENIED_RANGES: ReadonlyArray<{ range: Range; reason: DenyReason }> = DEFAULT_DENIED.map(({ cidr, reason }) => ({
  range: parseRange(cidr),
  reason,
}));
