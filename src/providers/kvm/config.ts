import { z } from 'zod';
import { egressPolicySchema } from '../../egress/policy-config.ts';
import { durationMs, resourceName } from '../../schema/zod-helpers.ts';
import { providerGcSchema } from '../gc-settings.ts';
import { REQUIRED_PLACEHOLDERS } from './domain-xml.ts';

import { kvmHostSchema } from '../../kvm/host-config.ts';

export { kvmHostSchema, type KvmHostConfig } from '../../kvm/host-config.ts';

/** How proxies are made on the hosts; without it the provider is health-checked but hosts no proxies. */
export const kvmProxiesSchema = z.strictObject({
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
