import { z } from 'zod';
import { resourceName } from '../../config/zod-helpers.ts';

/**
 * A `gcp` provider. Credentials, in order of precedence: `accessTokenFile`, `credentialsFile`, Application
 * Default Credentials. See docs/gcp-provider.md.
 */
/** How proxies run as Compute instances; without it the provider is health-checked but hosts no proxies. */
export const gcpProxiesSchema = z
  .strictObject({
    /** Boot image holding the forward proxy (`projects/p/global/images/family/f`); this or instanceTemplate. */
    image: z.string().min(1).optional(),
    /** An instance template (`global/instanceTemplates/t`); this or image. */
    instanceTemplate: z.string().min(1).optional(),
    machineType: z.string().min(1).optional(),
    network: z.string().min(1).optional(),
    networkTags: z.array(z.string().min(1)).optional(),
    port: z.number().int().min(1).max(65535).default(3128),
  })
  .refine((p) => Boolean(p.image) !== Boolean(p.instanceTemplate), { message: 'give exactly one of image and instanceTemplate' });

export const gcpProviderSchema = z.strictObject({
  name: resourceName,
  type: z.literal('gcp'),
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
