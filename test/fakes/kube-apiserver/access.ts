/**
 * Authorization and admission of the fake apiserver: per-token RBAC rules (verbs × resources), the
 * SelfSubjectAccessReview that answers from those same rules, and a ResourceQuota-like admission that
 * counts objects per namespace. The real order is kept: authentication, authorization, then admission.
 */
import { status, StatusError } from './status.ts';
import type { KubeRequest } from './types.ts';

export type Verb = 'get' | 'list' | 'create' | 'update' | 'patch' | 'delete' | 'watch';

/** One deny rule of a token: these verbs (all when undefined) on these resources (all when undefined). */
export interface DenyRule {
  verbs?: ReadonlySet<string>;
  resources?: ReadonlySet<string>;
  /** Deny only requests at the cluster scope (what a namespaced Role leaves out); otherwise every scope. */
  clusterScopeOnly?: boolean;
}

/** What the fake knows about who may do what, and the quotas its admission enforces. */
export interface AccessState {
  tokens: Map<string, string>;
  denied: Map<string, DenyRule[]>;
  /** namespace → resource plural (pods, secrets, services) → hard limit on the number of objects. */
  quotas: Map<string, { name: string; hard: Map<string, number> }>;
}

/** The bearer token of a request, if it carries one. */
export function bearer(e: KubeRequest): string | undefined {
  return e.authorization?.startsWith('Bearer ') ? e.authorization.slice(7) : undefined;
}

/** True when the token's rules allow `verb` on `resource` in `ns` (undefined: the cluster scope; the token must be known). */
export function allowed(access: AccessState, token: string, verb: string, resource: string, ns?: string): boolean {
  const rules = access.denied.get(token) ?? [];
  return !rules.some(
    (r) =>
      (r.verbs === undefined || r.verbs.has(verb)) && (r.resources === undefined || r.resources.has(resource)) && !(r.clusterScopeOnly && ns !== undefined),
  );
}

/** RBAC: 403 Forbidden with the real message when the token may not `verb` the `resource`. */
export function authorize(access: AccessState, e: KubeRequest, verb: Verb, resource: string, ns: string | undefined, name?: string, group = ''): void {
  const token = bearer(e);
  const user = token === undefined ? undefined : access.tokens.get(token);
  if (token === undefined || user === undefined) throw new StatusError(status(401, 'Unauthorized', 'Unauthorized'));
  if (allowed(access, token, verb, resource, ns)) return;
  const scope = ns === undefined ? 'at the cluster scope' : `in the namespace "${ns}"`;
  const what = name === undefined ? '' : ` "${name}"`;
  const qualified = group ? `${resource}.${group}` : resource;
  throw new StatusError(
    status(403, 'Forbidden', `${qualified}${what} is forbidden: User "${user}" cannot ${verb} resource "${resource}" in API group "${group}" ${scope}`, {
      ...(name === undefined ? {} : { name }),
      ...(group ? { group } : {}),
      kind: resource,
    }),
  );
}

/**
 * ResourceQuota admission on create: with a quota on `resource` in `ns`, a create that would exceed it is
 * refused with 403 Forbidden, as the real quota admission plugin does (same reason as an RBAC refusal).
 */
export function admitCreate(access: AccessState, resource: string, ns: string, name: string, used: number): void {
  const quota = access.quotas.get(ns);
  const limit = quota?.hard.get(resource);
  if (quota === undefined || limit === undefined || used + 1 <= limit) return;
  throw new StatusError(
    status(
      403,
      'Forbidden',
      `${resource} "${name}" is forbidden: exceeded quota: ${quota.name}, requested: ${resource}=1, used: ${resource}=${used}, limited: ${resource}=${limit}`,
      { name, kind: resource },
    ),
  );
}

interface ReviewBody {
  apiVersion?: string;
  kind?: string;
  spec?: {
    resourceAttributes?: { namespace?: string; verb?: string; group?: string; resource?: string; name?: string; subresource?: string };
    nonResourceAttributes?: { path?: string; verb?: string };
  };
}

/**
 * POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews: 201 with the review and its status, decided
 * by the caller's own rules. Creating a review is itself an authorized verb (resource
 * `selfsubjectaccessreviews`), so a test can make the review fail.
 */
export function selfSubjectAccessReview(access: AccessState, e: KubeRequest, body: unknown): [number, unknown] {
  authorize(access, e, 'create', 'selfsubjectaccessreviews', undefined, undefined, 'authorization.k8s.io');
  const review = (body ?? {}) as ReviewBody;
  const attrs = review.spec?.resourceAttributes;
  const nonResource = review.spec?.nonResourceAttributes;
  if (!attrs && !nonResource) {
    throw new StatusError(
      status(
        422,
        'Invalid',
        'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified',
        {
          group: 'authorization.k8s.io',
          kind: 'SelfSubjectAccessReview',
          causes: [
            {
              reason: 'FieldValueInvalid',
              message: 'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified',
              field: 'spec.resourceAttributes',
            },
          ],
        },
      ),
    );
  }
  const token = bearer(e) ?? '';
  const user = access.tokens.get(token) ?? '';
  const verb = attrs?.verb ?? nonResource?.verb ?? '';
  const ok = attrs ? allowed(access, token, verb, attrs.resource ?? '', attrs.namespace || undefined) : true;
  const where = attrs?.namespace
    ? `RoleBinding "egress" of Role "egress" in namespace "${attrs.namespace}"`
    : 'ClusterRoleBinding "egress" of ClusterRole "egress"';
  return [
    201,
    {
      kind: 'SelfSubjectAccessReview',
      apiVersion: 'authorization.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec: review.spec,
      // RBAC only ever allows or has no opinion; `denied` is for authorizers that deny explicitly.
      status: ok ? { allowed: true, reason: `RBAC: allowed by ${where} to User "${user}"` } : { allowed: false },
    },
  ];
}
