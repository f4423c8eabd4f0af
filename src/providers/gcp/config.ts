import { z } from 'zod';
import { resourceName } from '../../config/zod-helpers.ts';

export const gcpProviderSchema = z.strictObject({
  name: resourceName,
  type: z.literal('gcp'),
  project: z.string().min(1),
  /** Default zone for new proxies. */
  zone: z.string().min(1).default('us-central1-a'),
  /** A service-account key file; without it, Application Default Credentials are used. */
  credentialsFile: z.string().min(1).optional(),
  /** A file holding an OAuth access token, sent as a bearer token (for tests and short-lived tokens). */
  accessTokenFile: z.string().min(1).optional(),
  /** Compute API endpoint override: host name, port and protocol (for a local fake). */
  apiEndpoint: z.string().min(1).optional(),
  port: z.number().int().min(1).max(65535).optional(),
  protocol: z.enum(['http', 'https']).optional(),
});

export type GcpProviderConfig = z.infer<typeof gcpProviderSchema>;
