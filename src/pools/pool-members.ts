import { POOL_LABEL, poolDocumentSchema, type Pool } from '../model/pool-resource.ts';
import type { Proxy } from '../model/proxy-resource.ts';
import { issueLines } from '../schema/zod-helpers.ts';

/* What the pool plan (plan-pool.ts) asks of a pool and its members, each question in one place. Pure. */

/** The pool a Proxy belongs to, by its label (undefined for a plain Proxy). */
export function poolOf(proxy: Pick<Proxy, 'labels'>): string | undefined {
  return proxy.labels[POOL_LABEL];
}

export const isReady = (p: Proxy): boolean => p.status.phase === 'Ready';
export const isFailed = (p: Proxy): boolean => p.status.phase === 'Failed';

/** Since when a Failed member has been Failed: its Ready condition's last flip (else its creation). */
export function failedSince(p: Proxy): number {
  const ready = p.status.conditions.find((c) => c.type === 'Ready');
  return Date.parse(ready?.lastTransitionTime ?? p.metadata.createdAt);
}

/** Least healthy first (Failed, then not Ready), then the oldest: the order members are removed in. */
export function removalOrder(a: Proxy, b: Proxy): number {
  const rank = (p: Proxy): number => (isFailed(p) ? 0 : isReady(p) ? 2 : 1);
  return rank(a) - rank(b) || a.metadata.createdAt.localeCompare(b.metadata.createdAt) || a.name.localeCompare(b.name);
}

/**
 * How many members the pool wants now: `spec.replicas`, or, for an autoscaled pool, the count its
 * autoscaler last decided (from `spec.replicas`, clamped to min/max, before its first decision).
 */
export function desiredReplicas(pool: Pick<Pool, 'spec' | 'status'>): number {
  const a = pool.spec.autoscale;
  if (!a) return pool.spec.replicas ?? 0;
  const decided = pool.status.autoscale?.desired ?? pool.spec.replicas ?? a.minReplicas;
  return Math.min(a.maxReplicas, Math.max(a.minReplicas, decided));
}

/** The labels a member carries: the template's, its spread entry's (`placeLabels`, over them) and the pool label. */
export function memberLabels(pool: Pool, placeLabels: Record<string, string> = {}): Record<string, string> {
  return { ...pool.spec.template.metadata.labels, ...placeLabels, [POOL_LABEL]: pool.name };
}

export function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

/**
 * What the API would refuse in a pool written around it (`kubectl apply` with the Kubernetes store,
 * where the CRD cannot express every rule: provider or spread, the reserved label, duplicate spread
 * entries, the 10s floor of maxAge), or that the store read as not even a spec (`specProblems`):
 * such a pool makes no members.
 */
export function invalidSpec(pool: Pool): string | undefined {
  // What the store could not read as a spec at all (its fields of the wrong type): `spec` holds only the rest.
  if (pool.specProblems) return `invalid spec, no members made: ${pool.specProblems.join('; ')}`;
  const result = poolDocumentSchema.safeParse({ kind: 'ProxyPool', metadata: { name: pool.name, labels: pool.labels }, spec: pool.spec });
  return result.success ? undefined : `invalid spec, no members made: ${issueLines(result.error).join('; ')}`;
}
