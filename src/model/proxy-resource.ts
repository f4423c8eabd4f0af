import { z } from 'zod';
import { resourceName } from '../schema/zod-helpers.ts';

export const PROXY_PHASES = ['Pending', 'Provisioning', 'Ready', 'Failed', 'Terminating'] as const;
export type ProxyPhase = (typeof PROXY_PHASES)[number];

const labelKey = z
  .string()
  .regex(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, 'expected a label key such as team or example.com/team')
  .max(253);
const labelValue = z
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

export interface ProxyCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
}

export interface ProxyStatus {
  phase: ProxyPhase;
  /** `http://host:port`, without credentials (discovery adds them for authorised callers). */
  url?: string;
  instanceName?: string;
  instanceId?: string;
  egressIp?: string;
  conditions: ProxyCondition[];
  lastError?: string;
  /** Readiness probes failed in a row (reset by a success). */
  probeFailures?: number;
  /** Readiness probes passed in a row by a proxy coming back after failures (it returns at `--probe-successes`). */
  probeSuccesses?: number;
  /** ISO time the proxy stopped being ready (while it is not); it is replaced after a while. */
  unreadySince?: string;
  /**
   * Where the instance is: the provider and placement it was made at, recorded before the
   * create. When the spec names another provider or placement, the instance here is removed
   * before one is made there.
   */
  instanceLocation?: InstanceLocation;
  /** The spec generation the status describes. */
  observedGeneration: number;
}

export interface InstanceLocation {
  provider: string;
  placement?: string;
}

/** A Proxy as stored and served. */
export interface Proxy {
  name: string;
  labels: Record<string, string>;
  spec: ProxySpec;
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
