import { z } from 'zod';
import { egressPolicySchema } from '../../egress/policy-config.ts';
import { isIP } from 'node:net';
import { resourceName } from '../../schema/zod-helpers.ts';
import { providerGcSchema } from '../gc-settings.ts';

/** An IPv4 or IPv6 address range in CIDR notation (`203.0.113.0/24`, `2001:db8::/32`); a bare address is one host. */
export function isCidr(range: string): boolean {
  const [addr, bits, ...rest] = range.split('/');
  if (rest.length > 0 || addr === undefined) return false;
  const family = isIP(addr);
  if (family === 0) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}

const cidr = z.string().refine(isCidr, { message: 'expected an address range in CIDR notation, such as 203.0.113.0/24' });

/** The firewall rule that lets crawlers reach the proxies; see docs/gcp-provider.md. */
export const gcpFirewallSchema = z.strictObject({
  /** Who may connect to the proxy port: the crawlers' (and workers') address ranges. */
  sourceRanges: z.array(cidr).min(1, 'give at least one address range'),
  /** The network the rule applies to (default: `proxies.network`, else `global/networks/default`). */
  network: z.string().min(1).optional(),
});

/**
 * A `gcp` provider. Credentials, in order of precedence: `accessTokenFile`, `credentialsFile`, Application
 * Default Credentials. See docs/gcp-provider.md.
 */
/** How proxies run as Compute instances; without it the provider is health-checked but hosts no proxies. */
export const gcpProxiesSchema = z
  .strictObject({
    /** Boot image (`projects/p/global/images/family/f`); this or instanceTemplate; neither: DEFAULT_GCP_IMAGE (Debian 12). */
    image: z.string().min(1).optional(),
    /** An instance template (`global/instanceTemplates/t`); this or image. */
    instanceTemplate: z.string().min(1).optional(),
    machineType: z.string().min(1).optional(),
    network: z.string().min(1).optional(),
    networkTags: z.array(z.string().min(1)).optional(),
    port: z.number().int().min(1).max(65535).default(3128),
    /** A managed firewall rule opening `port` from `sourceRanges` to the proxies' network tag. */
    firewall: gcpFirewallSchema.optional(),
    /** Where the proxies may connect (docs/proxies.md#egress-policy); default deny toward the inside. */
    egressPolicy: egressPolicySchema.optional(),
    /** Send the cloud-init user-data that installs and starts the proxy on a stock Debian 12 image (default true). */
    bootUserData: z.boolean().default(true),
  })
  .refine((p) => !(p.image && p.instanceTemplate), { message: 'give at most one of image and instanceTemplate' })
  .transform((p) => (p.image || p.instanceTemplate ? p : { ...p, image: DEFAULT_GCP_IMAGE }));

/** The image proxies boot without `image` or `instanceTemplate`: Debian 12, which the user-data turns into a proxy. */
export const DEFAULT_GCP_IMAGE = 'projects/debian-cloud/global/images/family/debian-12';

export const gcpProviderSchema = z.strictObject({
  name: resourceName,
  type: z.literal('gcp'),
  /** Garbage-collection settings of this provider (docs/proxies.md#garbage-collection). */
  gc: providerGcSchema.optional(),
  project: z.string().min(1),
  /** Default zone for new proxies. */
  zone: z.string().min(1).default('us-central1-a'),
  /** A service-account key file; without it, Application Default Credentials are used. */
  credentialsFile: z.string().min(1).optional(),
  /** A file holding an OAuth access token, sent as a bearer token, re-read every minute (tests, short-lived tokens). */
  accessTokenFile: z.string().min(1).optional(),
  /** Compute API endpoint override: a host name only (the port goes in `port`), for a local fake or a private endpoint. */
  apiEndpoint: z.string().min(1).optional(),
  /** Endpoint port (default 443). */
  port: z.number().int().min(1).max(65535).optional(),
  /** `http` for a plain-HTTP fake (default `https`). */
  protocol: z.enum(['http', 'https']).optional(),
  proxies: gcpProxiesSchema.optional(),
});

export type GcpProviderConfig = z.infer<typeof gcpProviderSchema>;
