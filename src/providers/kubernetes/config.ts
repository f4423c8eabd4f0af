import { z } from 'zod';
import { resourceName } from '../../config/zod-helpers.ts';

export const kubernetesProviderSchema = z.strictObject({
  name: resourceName,
  type: z.literal('kubernetes'),
  /** A kubeconfig file; without it and without `server`, the in-cluster service account is used. */
  kubeconfig: z.string().min(1).optional(),
  context: z.string().min(1).optional(),
  /** An API server URL, used with `tokenFile` instead of a kubeconfig. */
  server: z.string().url().optional(),
  /** A file holding a bearer token for `server`. Read at start, never logged. */
  tokenFile: z.string().min(1).optional(),
  /** A CA bundle for `server`. */
  caFile: z.string().min(1).optional(),
  skipTLSVerify: z.boolean().default(false),
  /** Namespace that proxy Pods are created in. */
  namespace: z.string().min(1).default('default'),
});

export type KubernetesProviderConfig = z.infer<typeof kubernetesProviderSchema>;
