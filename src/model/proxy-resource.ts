import { z } from 'zod';
import { resourceName } from '../schema/zod-helpers.ts';

export const PROXY_PHASES = ['Pending', 'Provisioning', 'Ready', 'Failed', 'Terminating'] as const;
export type ProxyPhase = (typeof PROXY_PHASES)[number];

export const labelKey = z
  .string()
  .regex(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, 'expected a label key such as team or example.com/team')
  .max(253);
export const labelValue = z
  .string()
  .regex(/^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/, 'expected a label value of letters, digits, -, _ and .')
  .max(63);

/** One Proxy as a user writes it (`egress apply -f`). */
export const proxyDocumentSchema = z.strictObject({
  apiVersion: z.literal('egress-proxies/v1').optional(),
  kind: z.literal('Proxy').optional(),
  metadata: z.strictObject({
    name: resourceName,
    labels: z.record(labelKey, labelValue).default({}),
  }),
  spec: z.strictObject({
    /** The configured provider that hosts it. */
    provider: resourceName,
    /** Where, when the provider has a choice: a KVM host, a GCP zone, a Kubernetes namespace. */
    placement: z.string().min(1).max(63).optional(),
  }),
});
export type ProxyDocument = z.infer<typeof proxyDocumentSchema>;
export type ProxySpec = ProxyDocument['spec'];

export const proxyConditionSchema = z.strictObject({
  type: z.string().min(1),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string(),
  message: z.string(),
  lastTransitionTime: z.iso.datetime(),
});
export type ProxyCondition = z.infer<typeof proxyConditionSchema>;

export const instanceLocationSchema = z.strictObject({
  provider: z.string().min(1),
  placement: z.string().optional(),
});
export type InstanceLocation = z.infer<typeof instanceLocationSchema>;

/**
 * A Proxy's observed state, as reconcile, the probe loop and the exit watch write it. The one
 * definition: the type is inferred from it and the Kubernetes CRD's status schema is generated
 * from it (src/crds).
 */
export const proxyStatusSchema = z.strictObject({
  phase: z.enum(PROXY_PHASES),
  /** `http://host:port`, without credentials (discovery adds them for authorised callers). */
  url: z.string().optional(),
  instanceName: z.string().optional(),
  instanceId: z.string().optional(),
  egressIp: z.string().optional(),
  /** A list keyed by `type`. */
  conditions: z.array(proxyConditionSchema).meta({ listMapKeys: ['type'] }),
  lastError: z.string().optional(),
  /** Readiness probes failed in a row (reset by a success). */
  probeFailures: z.number().int().nonnegative().optional(),
  /** Readiness probes passed in a row by a proxy coming back after failures (it returns at `--probe-successes`). */
  probeSuccesses: z.number().int().nonnegative().optional(),
  /** ISO time the proxy stopped being ready (while it is not); it is replaced after a while. */
  unreadySince: z.iso.datetime().optional(),
  /**
   * Where the instance is: the provider and placement it was made at, recorded before the
   * create. When the spec names another provider or placement, the instance here is removed
   * before one is made there.
   */
  instanceLocation: instanceLocationSchema.optional(),
  /** The spec generation the status describes. */
  observedGeneration: z.number().int().nonnegative(),
});
export type ProxyStatus = z.infer<typeof proxyStatusSchema>;

/** A Proxy as stored and served. */
export interface Proxy {
  name: string;
  labels: Record<string, string>;
  spec: ProxySpec;
  /**
   * Set when the stored spec breaks the API's schema (an object written around the API, such as with
   * kubectl under a CRD that does not enforce it): one `spec.<field>: <problem>` line each. `spec` then
   * holds only the fields that passed, and reconcile fails the proxy with these instead of acting on it.
   */
  specProblems?: string[];
  metadata: {
    uid: string;
    /** Moves only when the spec or labels change. */
    generation: number;
    createdAt: string;
    /** Set by `delete`; the proxy disappears once its instance is gone. */
    deletionRequestedAt?: string;
    /** Set by `delete --orphan`: forget the proxy without removing its instance. */
    orphanInstance?: boolean;
  };
  status: ProxyStatus;
}
