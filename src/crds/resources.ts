import { z } from 'zod';
import { providerHealthStatusSchema } from '../health/provider-health.ts';
import { poolDocumentSchema, poolStatusSchema } from '../model/pool-resource.ts';
import { proxyDocumentSchema, proxyStatusSchema } from '../model/proxy-resource.ts';
import { resourceName } from '../schema/zod-helpers.ts';

/**
 * The custom resources' own shapes: the domain schemas (what the API validates and the stores
 * keep) plus the few fields only the Kubernetes objects carry. The CRDs are generated from these,
 * and the Kubernetes stores write these fields.
 */

export const API_GROUP = 'egress-proxies.io';
export const API_VERSION = 'v1alpha1';
export const GROUP_VERSION = `${API_GROUP}/${API_VERSION}`;

/** Keeps a Proxy (Terminating) until reconcile has removed its instance. */
export const INSTANCE_FINALIZER = `${API_GROUP}/instance`;
/** Set (to "true") by `egress delete --orphan`: forget the proxy without removing its instance. */
export const ORPHAN_ANNOTATION = `${API_GROUP}/orphan-instance`;
/** Keeps a ProxyPool (Terminating) until the pool reconcile has deleted its members. */
export const MEMBERS_FINALIZER = `${API_GROUP}/members`;
/** Labels the credential Secrets the Kubernetes store writes. */
export const PROXY_LABEL = `${API_GROUP}/proxy`;

/** ProviderHealth status plus `targetsReady` ("1/2"), for the TARGETS column of `kubectl get ph`. */
export const providerHealthResourceStatusSchema = providerHealthStatusSchema.extend({
  targetsReady: z
    .string()
    .regex(/^[0-9]+\/[0-9]+$/)
    .optional(),
});

export const proxyResourceSpecSchema = proxyDocumentSchema.shape.spec;

/** Proxy status plus the name of the Secret (in the Proxy's namespace) that holds its credentials. */
export const proxyResourceStatusSchema = proxyStatusSchema.extend({
  credentialsSecretRef: z.strictObject({ name: z.string().min(1) }).optional(),
});

/** A Proxy's `metadata.name`: what the API accepts as a proxy name (the only metadata a CRD may restrict). */
export const proxyResourceNameSchema = resourceName;

/** A ProxyPool's spec and status are the domain's as they are: a pool has no Kubernetes-only fields. */
export const poolResourceSpecSchema = poolDocumentSchema.shape.spec;
export const poolResourceStatusSchema = poolStatusSchema;
/** A ProxyPool's `metadata.name`: a proxy name short enough for the members' 6-character suffix. */
export const poolResourceNameSchema = poolDocumentSchema.shape.metadata.shape.name;

/** `targetsReady` for a status: ready targets over all targets. */
export function targetsReady(targets: readonly { ready: boolean }[]): string {
  return `${targets.filter((t) => t.ready).length}/${targets.length}`;
}
