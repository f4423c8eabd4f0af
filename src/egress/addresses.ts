import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * IP address helpers for the egress policy. Only text that `net.isIP` accepts (canonical dotted
 * decimal or an IPv6 literal) is ever parsed here: other spellings (`0x7f.1`, `2130706433`,
 * `0177.0.0.1`) are host names for the resolver, whose answer is what gets judged.
 */
export type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** The parsed address, or undefined when `text` is not an IP literal (brackets and an IPv6 zone are allowed). */
export function parseAddress(text: string): Address | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  if (isIP(bare) === 0) return undefined;
  try {
    return ipaddr.parse(bare);
  } catch {
    return undefined;
  }
}

function ipv4FromParts(high: number, low: number): ipaddr.IPv4 {
  return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
}

/** IPv6 prefixes that carry an IPv4 address, and where (the index of its high 16-bit part). */
const EMBEDDING: ReadonlyArray<{ range: [ipaddr.IPv6, number]; at: number }> = [
  { range: ipaddr.IPv6.parseCIDR('::ffff:0:0/96'), at: 6 }, // IPv4-mapped
  { range: ipaddr.IPv6.parseCIDR('::/96'), at: 6 }, // IPv4-compatible (deprecated, still routed by some stacks)
  { range: ipaddr.IPv6.parseCIDR('::ffff:0:0:0/96'), at: 6 }, // IPv4-translated (SIIT)
  { range: ipaddr.IPv6.parseCIDR('64:ff9b::/96'), at: 6 }, // NAT64 well-known prefix
  { range: ipaddr.IPv6.parseCIDR('2002::/16'), at: 1 }, // 6to4
];

/**
 * The address a connection to `address` effectively reaches, for judging: the embedded IPv4
 * address of the mapped, compatible, translated, NAT64 and 6to4 forms, else the address itself.
 * `::` and `::1` stay themselves (unspecified and loopback in their own right).
 */
export function effectiveAddress(address: Address): Address {
  if (address.kind() === 'ipv4') return address;
  const v6 = address as ipaddr.IPv6;
  const parts = v6.parts;
  if (parts.slice(0, 7).every((p) => p === 0) && (parts[7] ?? 0) <= 1) return v6;
  for (const { range, at } of EMBEDDING) {
    if (v6.match(range)) return ipv4FromParts(parts[at] ?? 0, parts[at + 1] ?? 0);
  }
  return v6;
}

/** A parsed CIDR range. */
export type Range = [Address, number];

export function parseRange(cidr: string): Range {
  return ipaddr.parseCIDR(cidr);
}

/** True when `address` lies in `range` (of the same family). */
export function inRange(address: Address, range: Range): boolean {
  return address.kind() === range[0].kind() && address.match(range);
}

/** The canonical text of an address (IPv4 dotted decimal, IPv6 RFC 5952), used as a set key. */
export function addressKey(address: Address): string {
  // Without an IPv6 zone (`fe80::1%eth0`): os.networkInterfaces() lists addresses without one.
  return address.kind() === 'ipv4' ? address.toString() : new ipaddr.IPv6((address as ipaddr.IPv6).parts).toString();
}
