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
}

/** slirp's netdev id in our domains; also how a domain's forward is found again in its XML. */
const NETDEV_ID = 'egressnet0';

function netdevArg(plan: PortForwardPlan): string {
  const rules = [`hostfwd=tcp:${plan.address}:${plan.hostPort}-:${plan.guestPort}`, ...plan.guestForwards.map((f) => `guestfwd=tcp:${f.guest}-tcp:${f.host}`)];
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
