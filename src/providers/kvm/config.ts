import { z } from 'zod';
import { egressPolicySchema } from '../../egress/policy-config.ts';
import { durationMs, resourceName } from '../../schema/zod-helpers.ts';
import { providerGcSchema } from '../gc-settings.ts';
import { QEMU_XMLNS, REQUIRED_PLACEHOLDERS, SETTING_PLACEHOLDERS } from './domain-xml.ts';
import { DEFAULT_GUEST_NETWORK, guestForwardProblem, guestNetworkOf, parsePortRange } from './port-forward.ts';

import { kvmHostSchema } from '../../kvm/host-config.ts';

export { kvmHostSchema, type KvmHostConfig } from '../../kvm/host-config.ts';

const hostPort = z.string().regex(/^[0-9.]+:\d{1,5}$/, 'must be IPV4:PORT');

/** Direct kernel boot: the files are uploaded to each host's pool, like `baseImageFile`. */
export const kvmKernelSchema = z.strictObject({
  kernelFile: z.string().min(1),
  initrdFile: z.string().min(1),
  cmdline: z.string().min(1).default('root=/dev/vda rw console=ttyS0'),
});

/** User-mode networking with a host port forwarded per proxy (port-forward.ts). */
export const kvmPortForwardSchema = z
  .strictObject({
    /** The host address the forwards listen on; the proxy's URL is `address:port`. */
    address: z.ipv4().default('127.0.0.1'),
    /** The host ports proxies are given, one each: `"20000-20099"`. */
    ports: z.string().refine((t) => parsePortRange(t) !== undefined, 'must be PORT or FIRST-LAST within 1-65535'),
    /** Guest addresses forwarded to host services (the orchestrator's echo, an origin); nothing else leaves the guest. */
    guestForwards: z.array(z.strictObject({ guest: hostPort, host: hostPort })).default([]),
    /**
     * The guest's network slirp makes (its `net=`): default 10.0.2.0/24. Every guest forward's address
     * lies in it; 169.254.0.0/16 gives a guest GCE's metadata address (169.254.169.254) as a forward.
     */
    network: z
      .string()
      .refine((t) => guestNetworkOf(t) !== undefined, 'must be an IPv4 CIDR such as 10.0.2.0/24, at most /30')
      .optional(),
  })
  .superRefine((forward, ctx) => {
    const net = guestNetworkOf(forward.network ?? DEFAULT_GUEST_NETWORK);
    if (!net) return;
    forward.guestForwards.forEach((f, i) => {
      const problem = guestForwardProblem(net, f.guest.slice(0, f.guest.lastIndexOf(':')));
      if (problem) ctx.addIssue({ code: 'custom', path: ['guestForwards', i, 'guest'], message: problem });
    });
  });

/** How proxies are made on the hosts; without it the provider is health-checked but hosts no proxies. */
const kvmProxiesObject = z.strictObject({
  /** Base image volume in each host's pool that proxy volumes are made from. */
  baseImageVolume: z.string().min(1),
  baseImageFormat: z.string().min(1).default('qcow2'),
  /** A local image file uploaded as `baseImageVolume` when a host's pool lacks it. */
  baseImageFile: z.string().min(1).optional(),
  cloneMode: z.enum(['overlay', 'copy']).default('overlay'),
  /** Domain XML with {{name}}, {{metadata}} and {{disk}} (see docs/kvm-provider.md). */
  domainTemplate: z
    .string()
    .refine((t) => REQUIRED_PLACEHOLDERS.every((p) => t.includes(`{{${p}}}`)), `must contain ${REQUIRED_PLACEHOLDERS.map((p) => `{{${p}}}`).join(', ')}`)
    .optional(),
  memoryMiB: z.number().int().min(32).max(65536).default(256),
  vcpus: z.number().int().min(1).max(64).default(1),
  /** libvirt network for the NIC; unset = user-mode networking. */
  network: z.string().min(1).optional(),
  proxyPort: z.number().int().min(1).max(65535).default(3128),
  /** Where the proxies may connect (docs/proxies.md#egress-policy); default deny toward the inside. */
  egressPolicy: egressPolicySchema.optional(),
  /** Attach a cloud-init seed that installs and starts the proxy on a stock Debian 12 base image (default true). */
  bootUserData: z.boolean().default(true),
  /** `kvm` (default) or `qemu`: TCG, for hosts whose hardware virtualisation does not work. */
  domainType: z.enum(['kvm', 'qemu']).default('kvm'),
  kernel: kvmKernelSchema.optional(),
  portForward: kvmPortForwardSchema.optional(),
});

export const kvmProxiesSchema = kvmProxiesObject.superRefine((proxies, ctx) => {
  const template = proxies.domainTemplate;
  if (template === undefined) return;
  for (const setting of ['kernel', 'portForward'] as const) {
    const placeholder = SETTING_PLACEHOLDERS[setting];
    if (proxies[setting] !== undefined && !template.includes(`{{${placeholder}}}`)) {
      ctx.addIssue({ code: 'custom', path: ['domainTemplate'], message: `must contain {{${placeholder}}} when ${setting} is set` });
    }
  }
  if (proxies.portForward !== undefined && !template.includes('xmlns:qemu=')) {
    ctx.addIssue({
      code: 'custom',
      path: ['domainTemplate'],
      message: `must declare xmlns:qemu='${QEMU_XMLNS}' on <domain> when portForward is set`,
    });
  }
});

export const kvmProviderSchema = z
  .strictObject({
    name: resourceName,
    type: z.literal('kvm'),
    /** Garbage-collection settings of this provider (docs/proxies.md#garbage-collection). */
    gc: providerGcSchema.optional(),
    hosts: z.array(kvmHostSchema).min(1),
    /** Pooled connections unused for this long are closed. */
    idleTimeout: durationMs.default(300_000),
    proxies: kvmProxiesSchema.optional(),
  })
  .superRefine((provider, ctx) => {
    const seen = new Set<string>();
    provider.hosts.forEach((host, i) => {
      if (seen.has(host.name)) ctx.addIssue({ code: 'custom', path: ['hosts', i, 'name'], message: `duplicate host name "${host.name}"` });
      seen.add(host.name);
      if (!host.knownHostsFile && !host.insecureIgnoreHostKey) {
        ctx.addIssue({ code: 'custom', path: ['hosts', i, 'knownHostsFile'], message: 'required unless insecureIgnoreHostKey is true' });
      }
    });
  });

export type KvmProviderConfig = z.infer<typeof kvmProviderSchema>;
