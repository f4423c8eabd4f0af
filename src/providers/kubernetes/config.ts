import { z } from 'zod';
import { egressPolicySchema } from '../../egress/policy-config.ts';
import { resourceName } from '../../schema/zod-helpers.ts';
import { providerGcSchema } from '../gc-settings.ts';

/**
 * A `kubernetes` provider. The API server is reached through, in order of precedence: `kubeconfig` (with
 * `context`), `server` + `tokenFile`, or the in-cluster service account. See docs/kubernetes-provider.md.
 */
/** The Service in front of each proxy Pod, when proxies are reached through one instead of the Pod IP. */
export const SERVICE_TYPES = ['ClusterIP', 'NodePort', 'LoadBalancer'] as const;
export type ProxyServiceType = (typeof SERVICE_TYPES)[number];

export const kubernetesServiceSchema = z
  .strictObject({
    type: z.enum(SERVICE_TYPES),
    /** NodePort only: the host crawlers and workers reach the nodes on (a node IP, a DNS name). */
    nodeAddress: z.string().min(1).optional(),
  })
  .superRefine((s, ctx) => {
    if (s.type === 'NodePort' && !s.nodeAddress) {
      ctx.addIssue({ code: 'custom', path: ['nodeAddress'], message: 'required with type NodePort: the address crawlers reach the nodes on' });
    }
    if (s.type !== 'NodePort' && s.nodeAddress) {
      ctx.addIssue({ code: 'custom', path: ['nodeAddress'], message: `only used with type NodePort, not ${s.type}` });
    }
  });

export type KubernetesServiceConfig = z.infer<typeof kubernetesServiceSchema>;

/** How proxies run as Pods; without it the provider is health-checked but hosts no proxies. */
export const kubernetesProxiesSchema = z.strictObject({
  /** Forward-proxy image; it reads PROXY_PORT, PROXY_USER and PROXY_PASSWORD, and enforces EGRESS_PROXY_POLICY. */
  image: z.string().min(1).optional(),
  port: z.number().int().min(1).max(65535).default(3128),
  /** A Service per proxy; the proxy URL is then the Service's address instead of the Pod IP. */
  service: kubernetesServiceSchema.optional(),
  /** Where the proxies may connect (docs/proxies.md#egress-policy); default deny toward the inside. */
  egressPolicy: egressPolicySchema.optional(),
});

export const kubernetesProviderSchema = z.strictObject({
  name: resourceName,
  type: z.literal('kubernetes'),
  /** Garbage-collection settings of this provider (docs/proxies.md#garbage-collection). */
  gc: providerGcSchema.optional(),
  /** A kubeconfig file; without it and without `server`, the in-cluster service account is used. */
  kubeconfig: z.string().min(1).optional(),
  context: z.string().min(1).optional(),
  /** An API server URL, used with `tokenFile` instead of a kubeconfig. */
  server: z.string().url().optional(),
  /** A file holding a bearer token for `server`. Checked at start, re-read every minute, never logged. */
  tokenFile: z.string().min(1).optional(),
  /** A CA bundle for `server`. */
  caFile: z.string().min(1).optional(),
  /** Skip TLS verification of `server` (tests only; required for a plain http:// server). */
  skipTLSVerify: z.boolean().default(false),
  /** Namespace that proxy Pods are created in. */
  namespace: z.string().min(1).default('default'),
  /**
   * The namespaces this provider may use: `namespace` and every placement. When given, the health check
   * and GC list in each of them (a namespaced Role is enough) and a placement outside them fails its proxy;
   * when absent, they list cluster-wide (a ClusterRole) and any namespace is a placement.
   */
  namespaces: z.array(z.string().min(1)).min(1).optional(),
  proxies: kubernetesProxiesSchema.optional(),
});

export type KubernetesProviderConfig = z.infer<typeof kubernetesProviderSchema>;
