/**
 * Request routing of the fake apiserver: discovery, SelfSubjectAccessReview, the kinds stored generically
 * (generic-routes.ts), and core/v1 pods, secrets and services (see server.ts for scope and deviations).
 */
import type { ServerResponse } from 'node:http';
import { admitCreate, authorize as authorizeResource, selfSubjectAccessReview, type AccessState, type Verb } from './access.ts';
import { listObjects, listPods } from './lists.ts';
import type { ObjectStore } from './object-store.ts';
import { applyPatch } from './patch.ts';
import type { PodStore } from './pod-store.ts';
import type { KubeRequest } from './types.ts';
import { discovery } from './discovery.ts';
import { openApiV3 } from './openapi.ts';
import { genericRoute, resolveGeneric } from './generic-routes.ts';
import type { ResourceStore } from './resource-store.ts';
import { badRequest, notFound, routeNotFound, status, StatusError, unauthorized } from './status.ts';
import { serveWatch } from './watch.ts';

export type { Verb };

export interface RouteContext {
  store: PodStore;
  secrets: ObjectStore;
  services: ObjectStore;
  access: AccessState;
  continueEpoch: number;
  bookmarkIntervalMs: number;
  /** Custom resources and the built-ins stored generically. */
  resources: ResourceStore;
  /** Materializes Namespace objects for namespaces known only by name (seeded Pods, defaults). */
  ensureNamespaces(): void;
}

/** A JSON answer, or `streaming` when a watch took over the response. */
export type RouteResult = [number, unknown] | 'streaming';

const NOT_ALLOWED = 'the server does not allow this method on the requested resource';

function authorize(ctx: RouteContext, entry: KubeRequest, verb: Verb, ns: string | undefined, name?: string): void {
  authorizeResource(ctx.access, entry, verb, 'pods', ns, name);
}

export function route(ctx: RouteContext, e: KubeRequest, res: ServerResponse): RouteResult {
  // Authentication comes before routing, as on the real server.
  const token = e.authorization?.startsWith('Bearer ') ? e.authorization.slice(7) : undefined;
  if (token === undefined || !ctx.access.tokens.has(token)) throw new StatusError(unauthorized());
  const parts = e.path.split('/').filter(Boolean).map(decodeURIComponent);
  const discovered = discovery(ctx.resources, parts, e.method) ?? openApiV3(ctx.resources, parts, e.method);
  if (discovered) return discovered;
  if (parts.join('/') === 'apis/authorization.k8s.io/v1/selfsubjectaccessreviews') {
    if (e.method !== 'POST') throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
    return selfSubjectAccessReview(ctx.access, e, parseJson(e.body));
  }
  const generic = resolveGeneric(ctx.resources, parts);
  if (generic) {
    if (generic.type.group === '' && generic.type.plural === 'namespaces') ctx.ensureNamespaces();
    return genericRoute(ctx, e, res, generic);
  }
  if (parts[0] !== 'api' || parts[1] !== 'v1') throw routeNotFound();
  const rest = parts.slice(2);
  const dryRun = e.query.dryRun === 'All';
  const { store } = ctx;
  if (rest[0] === 'pods' && rest.length === 1) return list(ctx, e, undefined, res);
  const other = rest[0] === 'namespaces' ? rest[2] : rest[0];
  if (other === 'secrets' || other === 'services') {
    return objectRoute(ctx, e, other === 'secrets' ? ctx.secrets : ctx.services, rest[0] === 'namespaces' ? rest.slice(1) : [undefined, ...rest]);
  }
  if (rest[0] !== 'namespaces' || rest[2] !== 'pods' || rest.length > 5) throw routeNotFound();
  const ns = rest[1]!;
  const name = rest[3];
  if (rest.length === 5) {
    if (rest[4] !== 'status') throw routeNotFound();
    return write(ctx, e, ns, name!, 'status');
  }
  if (name === undefined) {
    if (e.method === 'GET') return list(ctx, e, ns, res);
    if (e.method === 'POST') {
      authorize(ctx, e, 'create', ns);
      const body = parseJson(e.body);
      // ResourceQuota admission counts the Pods that are not terminal yet.
      const live = store.list(ns).filter((p) => p.status.phase !== 'Succeeded' && p.status.phase !== 'Failed').length;
      admitCreate(ctx.access, 'pods', ns, nameOf(body), live);
      return [201, store.create(ns, body, dryRun)];
    }
  } else {
    if (e.method === 'GET') {
      authorize(ctx, e, 'get', ns, name);
      const pod = store.get(ns, name);
      if (!pod) throw new StatusError(status(404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' }));
      return [200, pod];
    }
    if (e.method === 'DELETE') {
      authorize(ctx, e, 'delete', ns, name);
      const opts = e.body ? (parseJson(e.body) as { gracePeriodSeconds?: number; dryRun?: string[] }) : {};
      const q = e.query.gracePeriodSeconds;
      const grace = q !== undefined ? Number(q) : opts.gracePeriodSeconds;
      return [200, store.delete(ns, name, grace, dryRun || (opts.dryRun ?? []).includes('All'))];
    }
    if (e.method === 'PUT' || e.method === 'PATCH') return write(ctx, e, ns, name, 'main');
  }
  throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
}

/** PUT / PATCH on a Pod or its status; a GET of `/status` reads the Pod. */
function write(ctx: RouteContext, e: KubeRequest, ns: string, name: string, sub: 'main' | 'status'): RouteResult {
  if (e.method === 'GET') {
    authorize(ctx, e, 'get', ns, name);
    const pod = ctx.store.get(ns, name);
    if (!pod) throw new StatusError(status(404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' }));
    return [200, pod];
  }
  if (e.method === 'PUT') {
    authorize(ctx, e, 'update', ns, name);
    return [200, ctx.store.update(ns, name, parseJson(e.body), sub, true)];
  }
  if (e.method === 'PATCH') {
    authorize(ctx, e, 'patch', ns, name);
    const current = ctx.store.get(ns, name);
    if (!current) throw new StatusError(status(404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' }));
    const patched = applyPatch(current as never, e.contentType, e.body, e.query.fieldManager);
    return [200, ctx.store.update(ns, name, patched, sub, false)];
  }
  throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
}

function list(ctx: RouteContext, e: KubeRequest, ns: string | undefined, res: ServerResponse): RouteResult {
  if (e.method !== 'GET') throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
  const q = e.query;
  const watch = q.watch === 'true' || q.watch === '1';
  authorize(ctx, e, watch ? 'watch' : 'list', ns);
  if (watch) {
    serveWatch(
      ctx.store,
      res,
      {
        namespace: ns,
        labelSelector: q.labelSelector,
        fieldSelector: q.fieldSelector,
        resourceVersion: q.resourceVersion,
        allowWatchBookmarks: q.allowWatchBookmarks === 'true',
        timeoutSeconds: q.timeoutSeconds,
        bookmarkIntervalMs: ctx.bookmarkIntervalMs,
      },
      () => {
        e.status = 200;
        e.outcome = 'streaming';
      },
    );
    return 'streaming';
  }
  const params = { labelSelector: q.labelSelector, fieldSelector: q.fieldSelector, limit: q.limit, continue: q.continue };
  return [200, listPods(ctx.store.list(ns), params, ctx.store.resourceVersion(), ctx.continueEpoch)];
}

/**
 * Secrets and Services: `[ns, plural, name?]` (ns undefined for the cluster-wide list). Create, get, PUT,
 * PATCH (patch.ts; server-side apply creates), delete and list (selectors, limit, continue); no watch.
 */
function objectRoute(ctx: RouteContext, e: KubeRequest, objects: ObjectStore, [ns, , name, sub, ...more]: (string | undefined)[]): RouteResult {
  const plural = objects.rules.plural;
  const authz = (verb: Verb, n?: string): void => authorizeResource(ctx.access, e, verb, plural, ns, n);
  const dryRun = e.query.dryRun === 'All';
  if (more.length > 0 || (sub !== undefined && !(plural === 'services' && sub === 'status' && e.method === 'GET'))) throw routeNotFound();
  if (name === undefined) {
    if (e.method === 'GET') {
      if (e.query.watch === 'true' || e.query.watch === '1') throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
      authz('list');
      const q = e.query;
      return [
        200,
        listObjects(
          `${objects.rules.kind}List`,
          objects.list(ns),
          { labelSelector: q.labelSelector, fieldSelector: q.fieldSelector, limit: q.limit, continue: q.continue },
          ctx.store.resourceVersion(),
          ctx.continueEpoch,
        ),
      ];
    }
    if (e.method === 'POST' && ns !== undefined) {
      authz('create');
      const body = parseJson(e.body);
      admitCreate(ctx.access, plural, ns, nameOf(body), objects.count(ns));
      return [201, objects.create(ns, body, dryRun)];
    }
    throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
  }
  if (ns === undefined) throw routeNotFound();
  if (e.method === 'GET') {
    authz('get', name);
    const o = objects.get(ns, name);
    if (!o) throw notFound(plural, name);
    return [200, o];
  }
  if (e.method === 'PUT') {
    authz('update', name);
    return [200, objects.replace(ns, name, parseJson(e.body))];
  }
  if (e.method === 'PATCH') {
    authz('patch', name);
    const cur = objects.get(ns, name);
    if (!cur) {
      // Server-side apply creates a missing object.
      if (!(e.contentType ?? '').startsWith('application/apply-patch+yaml')) throw notFound(plural, name);
      applyPatch({}, e.contentType, e.body, e.query.fieldManager);
      authz('create', name);
      const body = parseJson(e.body) as { metadata?: object };
      admitCreate(ctx.access, plural, ns, name, objects.count(ns));
      return [201, objects.create(ns, { ...body, metadata: { ...body.metadata, name } }, dryRun)];
    }
    return [200, objects.replace(ns, name, applyPatch(cur as never, e.contentType, e.body, e.query.fieldManager))];
  }
  if (e.method === 'DELETE') {
    authz('delete', name);
    const opts = e.body ? (parseJson(e.body) as { dryRun?: string[] }) : {};
    const deleted = objects.delete(ns, name, dryRun || (opts.dryRun ?? []).includes('All'));
    if (!objects.rules.deleteReturnsStatus) return [200, deleted];
    return [200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind: plural, uid: deleted.metadata.uid } }];
  }
  throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
}

function nameOf(body: unknown): string {
  const meta = (body as { metadata?: { name?: unknown } } | null)?.metadata;
  return typeof meta?.name === 'string' ? meta.name : '';
}

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    throw badRequest(
      'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf',
    );
  }
}
