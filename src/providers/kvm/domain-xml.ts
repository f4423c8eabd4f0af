/**
 * XML of the KVM proxy lifecycle: the ownership tag (a libvirt metadata element in our
 * namespace), the proxy volume (a qcow2 overlay on the base image), the base volume, and the
 * domain made from a template. Pure functions; no I/O.
 */
import type { InstanceOwner } from '../lifecycle.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

/** Our metadata namespace: a domain carrying an element in it is ours; nothing else is. */
export const EGRESS_METADATA_URI = 'https://egress-proxies.dev/xmlns/libvirt/instance/1';
/** The XML prefix libvirt stores the element under (DOMAIN_SET_METADATA `key`). */
export const EGRESS_METADATA_KEY = 'egress';

/** What the tag says: who owns the domain and when it was created. */
export interface DomainTag extends InstanceOwner {
  createdAt: string;
}

export function escapeXml(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** The text an XML attribute or element holds, its entity and character references resolved. */
export function unescapeXml(value: string): string {
  return value
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&#(\d+);/g, (_m, d: string) => String.fromCodePoint(Number(d)))
    .replace(/&#x([0-9a-fA-F]+);/g, (_m, h: string) => String.fromCodePoint(parseInt(h, 16)))
    .replace(/&amp;/g, '&');
}

/** The tag element as stored in the domain's `<metadata>` (with its namespace declaration). */
export function tagElement(tag: DomainTag): string {
  return (
    `<${EGRESS_METADATA_KEY}:instance xmlns:${EGRESS_METADATA_KEY}="${EGRESS_METADATA_URI}"` +
    ` fleet="${escapeXml(tag.fleet)}" proxy="${escapeXml(tag.proxy)}" createdAt="${escapeXml(tag.createdAt)}"/>`
  );
}

/**
 * Reads the tag from what DOMAIN_GET_METADATA returns for our URI (libvirt re-serialises the
 * element, so prefixes and quoting may differ). Undefined when a field is missing.
 */
export function parseTag(xml: string): DomainTag | undefined {
  const start = /<(?:[A-Za-z_][\w.-]*:)?instance\b([^>]*)>/.exec(xml);
  if (!start) return undefined;
  const attrs = new Map<string, string>();
  for (const m of (start[1] ?? '').matchAll(/([A-Za-z_][\w.:-]*)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) {
    attrs.set(m[1] ?? '', unescapeXml(m[2] ?? m[3] ?? ''));
  }
  const fleet = attrs.get('fleet');
  const proxy = attrs.get('proxy');
  const createdAt = attrs.get('createdAt');
  if (!fleet || !proxy || !createdAt) return undefined;
  return { fleet, proxy, createdAt };
}

/** The proxy's volume: a qcow2 overlay whose backing store is the base image volume. */
export function overlayVolumeXml(name: string, capacityBytes: number, basePath: string, baseFormat: string): string {
  return (
    `<volume><name>${escapeXml(name)}</name><capacity unit='bytes'>${capacityBytes}</capacity>` +
    `<target><format type='qcow2'/></target>` +
    `<backingStore><path>${escapeXml(basePath)}</path><format type='${escapeXml(baseFormat)}'/></backingStore></volume>`
  );
}

/** A full copy of the base (STORAGE_VOL_CREATE_XML_FROM). */
export function copyVolumeXml(name: string): string {
  return `<volume><name>${escapeXml(name)}</name><target><format type='qcow2'/></target></volume>`;
}

/** The base image volume the local image file is uploaded into (bytes as they are). */
export function baseVolumeXml(name: string, capacityBytes: number): string {
  return `<volume><name>${escapeXml(name)}</name><capacity unit='bytes'>${capacityBytes}</capacity><target><format type='raw'/></target></volume>`;
}

/** The OEM string holding the egress policy document: this prefix, then the JSON. */
export const OEM_POLICY_PREFIX = 'egress.proxy.policy=';

/** Values a domain template is filled with. Each is already XML (escaped where needed). */
export interface DomainTemplateValues {
  name: string;
  /** `kvm` or `qemu` (TCG, for hosts without working hardware virtualisation). */
  domainType: string;
  /** Inside `<os>`: `<boot dev='hd'/>`, or the direct kernel boot's `<kernel>`, `<initrd>` and `<cmdline>`. */
  boot: string;
  memoryMiB: number;
  vcpus: number;
  /** `<egress:instance …/>`: goes inside `<metadata>`. */
  metadata: string;
  /** `<smbios mode='sysinfo'/>`: goes inside `<os>`. */
  smbios: string;
  /** `<sysinfo type='smbios'>…</sysinfo>` with the credentials and the egress policy as OEM strings. */
  sysinfo: string;
  /** The proxy volume as a virtio disk. */
  disk: string;
  /** The network interface (empty with a port forward: its NIC is in `qemuCommandline`). */
  interface: string;
  /** `<qemu:commandline>` with the port forward's netdev, or empty. Goes inside `<domain>`. */
  qemuCommandline: string;
}

/** Placeholders a custom template must hold (the tag must go in at define time). */
export const REQUIRED_PLACEHOLDERS = ['name', 'metadata', 'disk'] as const;

/** The namespace `<qemu:commandline>` lives in (the port forward's netdev); the default template declares it on `<domain>`. */
export const QEMU_XMLNS = 'http://libvirt.org/schemas/domain/qemu/1.0';

/** What a custom template must hold for a setting to take effect (config.ts refuses it otherwise). */
export const SETTING_PLACEHOLDERS = { kernel: 'boot', portForward: 'qemuCommandline' } as const;

/**
 * The default template: `{{domainType}}` (the provider's `domainType`, default kvm), the volume as
 * a virtio disk, one virtio NIC (or the port forward's), VNC on loopback only, a pty console.
 */
export const DEFAULT_DOMAIN_TEMPLATE = `<domain type='{{domainType}}' xmlns:qemu='${QEMU_XMLNS}'>
  <name>{{name}}</name>
  <metadata>{{metadata}}</metadata>
  <memory unit='MiB'>{{memoryMiB}}</memory>
  <vcpu>{{vcpus}}</vcpu>
  {{sysinfo}}
  <os><type arch='x86_64' machine='pc'>hvm</type>{{boot}}{{smbios}}</os>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    {{disk}}
    {{interface}}
    <serial type='pty'/>
    <console type='pty'/>
    <graphics type='vnc' listen='127.0.0.1'/>
    <memballoon model='none'/>
  </devices>
  {{qemuCommandline}}
</domain>`;

/** Fills `{{placeholder}}`s; an unknown placeholder is left for libvirt to reject. */
export function renderTemplate(template: string, values: DomainTemplateValues): string {
  const table = values as unknown as Record<string, string | number>;
  return template.replace(/\{\{\s*(\w+)\s*\}\}/g, (whole, key: string) => {
    const v = table[key];
    return v === undefined ? whole : String(v);
  });
}

export interface DomainXmlParams {
  name: string;
  tag: DomainTag;
  credentials: ProxyCredentials;
  /** `JSON.stringify` of the provider's ProxyEgressPolicy. */
  policy: string;
  memoryMiB: number;
  vcpus: number;
  pool: string;
  volume: string;
  /** A libvirt network name, or undefined for user-mode (SLIRP) networking. */
  network: string | undefined;
  template: string;
  /** The cloud-init NoCloud seed volume in the same pool, attached read-only after the proxy volume (seed.ts). */
  seedVolume?: string;
  /** Default `kvm`. */
  domainType?: 'kvm' | 'qemu';
  /** Direct kernel boot: the kernel's and initrd's paths on the host and the command line. */
  kernel?: { kernelPath: string; initrdPath: string; cmdline: string };
  /** `<qemu:commandline>` of the port forward (port-forward.ts); replaces the interface. */
  qemuCommandline?: string;
}

/**
 * The seed as a read-only virtio disk (`vdb`): cloud-init finds it by its label whatever the bus, and
 * virtio needs no IDE/SATA controller, so it suits any machine type a custom template picks.
 */
function seedDisk(pool: string, volume: string): string {
  return (
    `<disk type='volume' device='disk'><driver name='qemu' type='raw'/>` +
    `<source pool='${escapeXml(pool)}' volume='${escapeXml(volume)}'/><target dev='vdb' bus='virtio'/><readonly/></disk>`
  );
}

/**
 * The domain XML. The tag is part of it, so the define that makes the domain also marks it as
 * ours (no window in which an untagged domain of ours exists). The credentials and the egress
 * policy document travel as SMBIOS OEM strings (`egress.proxy.username=…`, `egress.proxy.password=…`,
 * `egress.proxy.policy=<JSON>`) that the guest reads with `dmidecode -t 11`; this XML is therefore
 * secret and never logged. A running domain cannot change its SMBIOS: the policy a domain has is
 * the one it was defined with.
 */
export function domainXml(p: DomainXmlParams): string {
  const oem = [`egress.proxy.username=${p.credentials.username}`, `egress.proxy.password=${p.credentials.password}`, `${OEM_POLICY_PREFIX}${p.policy}`];
  const iface = p.qemuCommandline
    ? ''
    : p.network
      ? `<interface type='network'><source network='${escapeXml(p.network)}'/><model type='virtio'/></interface>`
      : `<interface type='user'><model type='virtio'/></interface>`;
  const boot = p.kernel
    ? `<kernel>${escapeXml(p.kernel.kernelPath)}</kernel><initrd>${escapeXml(p.kernel.initrdPath)}</initrd><cmdline>${escapeXml(p.kernel.cmdline)}</cmdline>`
    : `<boot dev='hd'/>`;
  return renderTemplate(p.template, {
    name: escapeXml(p.name),
    domainType: p.domainType ?? 'kvm',
    boot,
    qemuCommandline: p.qemuCommandline ?? '',
    memoryMiB: p.memoryMiB,
    vcpus: p.vcpus,
    metadata: tagElement(p.tag),
    smbios: `<smbios mode='sysinfo'/>`,
    sysinfo: `<sysinfo type='smbios'><oemStrings>${oem.map((s) => `<entry>${escapeXml(s)}</entry>`).join('')}</oemStrings></sysinfo>`,
    disk:
      `<disk type='volume' device='disk'><driver name='qemu' type='qcow2'/>` +
      `<source pool='${escapeXml(p.pool)}' volume='${escapeXml(p.volume)}'/><target dev='vda' bus='virtio'/></disk>` +
      (p.seedVolume === undefined ? '' : seedDisk(p.pool, p.seedVolume)),
    interface: iface,
  });
}
