/**
 * User-mode networking with host port forwards, for hosts without bridges (and for tests, where
 * nothing may leave loopback): each proxy's guest port is forwarded from one host port of a
 * configured range on a host address, and named guest addresses are forwarded to host services
 * (the orchestrator's echo, an origin). slirp runs with `restrict=on`, so nothing else leaves the
 * guest. The forward is QEMU's own `-netdev user` passed through `<qemu:commandline>` (Debian 12's
 * libvirt has no passt backend, the only `<portForward>` there is).
 *
 * The host port is allocated from what the host's domains say: every domain's XML records its
 * forward, so an allocation survives restarts and is freed when the domain is undefined, and two
 * workers are kept apart by the port itself — a start whose port another QEMU holds fails, and
 * the lifecycle then defines the domain again on the next free port (lifecycle.ts).
 */
import ipaddr from 'ipaddr.js';
import { escapeXml } from './domain-xml.ts';

export interface PortRange {
  first: number;
  last: number;
}

/** `"20000-20099"` or `"20000"`; undefined when malformed (the config schema names the field). */
export function parsePortRange(text: string): PortRange | undefined {
  const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(text.trim());
  if (!m) return undefined;
  const first = Number(m[1]);
  const last = Number(m[2] ?? m[1]);
  if (first < 1 || last > 65535 || last < first) return undefined;
  return { first, last };
}

/** slirp's guest network unless `portForward.network` says otherwise. */
export const DEFAULT_GUEST_NETWORK = '10.0.2.0/24';

export interface GuestNetwork {
  cidr: string;
  range: [ipaddr.IPv4, number];
}

/** An IPv4 CIDR of at most /30 (slirp needs room for its host, DNS and DHCP addresses); undefined otherwise. */
export function guestNetworkOf(text: string): GuestNetwork | undefined {
  try {
    const [addr, bits] = ipaddr.IPv4.parseCIDR(text.trim());
    if (bits > 30) return undefined;
    return { cidr: `${ipaddr.IPv4.networkAddressFromCIDR(text.trim()).toString()}/${bits}`, range: [addr, bits] };
  } catch {
    return undefined;
  }
}

/**
 * Why QEMU would refuse `guest` as a guest forward's address in `net` (it must lie in the guest's
 * network and be neither slirp's host address, the second, nor its DNS, the third), or undefined.
 */
export function guestForwardProblem(net: GuestNetwork, guest: string): string | undefined {
  if (!ipaddr.IPv4.isValidFourPartDecimal(guest)) return `${guest} is not an IPv4 address`;
  const addr = ipaddr.IPv4.parse(guest);
  if (!addr.match(net.range)) return `${guest} is outside the guest network ${net.cidr} (portForward.network)`;
  const base = ipaddr.IPv4.networkAddressFromCIDR(net.cidr).toByteArray();
  const offset = addr.toByteArray().reduce((n, b) => n * 256 + b, 0) - base.reduce((n, b) => n * 256 + b, 0);
  if (offset === 2 || offset === 3) return `${guest} is slirp's own ${offset === 2 ? 'host' : 'DNS'} address in ${net.cidr}`;
  return undefined;
}

export interface GuestForward {
  /** Address:port inside the guest (slirp's 10.0.2.0/24, e.g. 10.0.2.100:8080). */
  guest: string;
  /** Host address:port it reaches (loopback; the service must listen before the domain starts). */
  host: string;
}

export interface PortForwardPlan {
  address: string;
  hostPort: number;
  guestPort: number;
  guestForwards: readonly GuestForward[];
  /** The guest network (`net=`); slirp's default 10.0.2.0/24 when absent. */
  network?: string;
}

/** slirp's netdev id in our domains; also how a domain's forward is found again in its XML. */
const NETDEV_ID = 'egressnet0';

/**
 * A guest forward's host end is a QEMU socket chardev: one stream per domain start that carries the
 * guest's connections to that address one after another (libvirt's seccomp sandbox forbids the
 * per-connection `cmd:` form). `reconnect=1` (the `,,` is an escaped comma inside the netdev's
 * options) lets the domain start while the host service is not listening yet and has QEMU dial it
 * again, a second later, after the service closed the stream; what the guest wrote meanwhile is lost.
 */
const GUEST_FORWARD_OPTIONS = ',,reconnect=1';

function netdevArg(plan: PortForwardPlan): string {
  const rules = [
    `hostfwd=tcp:${plan.address}:${plan.hostPort}-:${plan.guestPort}`,
    ...plan.guestForwards.map((f) => `guestfwd=tcp:${f.guest}-tcp:${f.host}${GUEST_FORWARD_OPTIONS}`),
    ...(plan.network ? [`net=${plan.network}`] : []),
  ];
  return ['user', `id=${NETDEV_ID}`, 'restrict=on', ...rules].join(',');
}

/** The `<qemu:commandline>` element: the slirp netdev with its forwards and a virtio NIC on it. */
export function qemuCommandline(plan: PortForwardPlan): string {
  const args = ['-netdev', netdevArg(plan), '-device', `virtio-net-pci,netdev=${NETDEV_ID},addr=0x10`];
  return `<qemu:commandline>${args.map((a) => `<qemu:arg value='${escapeXml(a)}'/>`).join('')}</qemu:commandline>`;
}

/** The host address and port a domain's XML forwards to its guest (the proxy's endpoint), if it has our forward. */
export function forwardOf(domainXml: string): { host: string; port: number } | undefined {
  const m = new RegExp(`id=${NETDEV_ID},restrict=on,hostfwd=tcp:([^:,]+):(\\d+)-`).exec(domainXml);
  if (!m) return undefined;
  return { host: m[1]!, port: Number(m[2]) };
}

/**
 * The port for a new domain: the first in the range, counting from a place the name picks (so
 * concurrent allocations for different names rarely meet), that no domain on the host holds and
 * that `avoid` does not list (ports a start just found taken).
 */
export function choosePort(range: PortRange, name: string, held: ReadonlySet<number>, avoid: ReadonlySet<number> = new Set()): number | undefined {
  const size = range.last - range.first + 1;
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  const start = (h >>> 0) % size;
  for (let i = 0; i < size; i++) {
    const port = range.first + ((start + i) % size);
    if (!held.has(port) && !avoid.has(port)) return port;
  }
  return undefined;
}

/** QEMU's words when a forward's host port is taken (the start then fails with this in libvirt's message). */
export function isForwardPortTaken(message: string): boolean {
  return message.includes('Could not set up host forwarding rule');
}
