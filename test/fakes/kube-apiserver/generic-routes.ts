/**
 * Routes of the kinds stored generically (custom resources and the built-ins of resource-types.ts):
 * `/api/v1/…` and `/apis/{group}/{version}/…`, `[namespaces/{ns}/]{plural}[/{name}[/status]]`.
 * GET (object, list with selectors/limit/continue, watch, and `as=Table`), POST, PUT, PATCH (merge, JSON
 * patch, strategic merge as a merge patch on built-ins and 415 on custom resources, server-side apply that
 * creates a missing object and merges list-maps by key), DELETE (finalizers, preconditions).
 */
import type { ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import { authorize, type AccessState, type Verb } from './access.ts';
import { listObjects } from './lists.ts';
import { applyPatch } from './patch.ts';
import { notFoundIn, typeKey, type ResourceEvent, type ResourceStore, type StoredObject } from './resource-store.ts';
import { groupVersion, type ResourceType } from './resource-types.ts';
import { badRequest, routeNotFound, status, StatusError } from './status.ts';
import { applyMerge } from './structural-schema.ts';
import { toTable, wantsTable } from './table.ts';
import type { KubeRequest } from './types.ts';
import { streamWatch, type WatchSource } from './watch.ts';

export interface GenericContext {
  resources: ResourceStore;
  access: AccessState;
  continueEpoch: number;
  bookmarkIntervalMs: number;
}

export interface GenericTarget {
  type: ResourceType;
  version: string;
  ns: string | undefined;
  name: string | undefined;
  sub: 'status' | undefined;
}

const NOT_ALLOWED = 'the server does not allow this method on the requested resource';

/** Resolves a path (split, decoded) to a generic type; undefined when no generic type serves it. */
export function resolveGeneric(store: ResourceStore, parts: string[]): GenericTarget | undefined {
  let group: string;
  let version: string;
  let rest: string[];
  if (parts[0] === 'api' && parts[1] === 'v1') [group, version, rest] = ['', 'v1', parts.slice(2)];
  else if (parts[0] === 'apis' && parts.length >= 4) [group, version, rest] = [parts[1]!, parts[2]!, parts.slice(3)];
  else return undefined;
  let ns: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3 && rest[2] !== 'status') {
    // `namespaces/{ns}/{plural}…`: generic only when a generic namespaced type serves the plural.
    if (!store.find(group, version, rest[2]!)?.namespaced) return undefined;
    ns = rest[1];
    rest = rest.slice(2);
  }
  const type = store.find(group, version, rest[0] ?? '');
  if (!type) return undefined;
  const [, name, sub, ...more] = rest;
  if (more.length > 0 || (sub !== undefined && (sub !== 'status' || !type.statusSubresource))) throw routeNotFound();
  // A namespaced object is addressed under its namespace; a cluster-scoped one never is.
  if (type.namespaced && ns === undefined && name !== undefined) throw routeNotFound();
  return { type, version, ns, name, sub: sub === 'status' ? 'status' : undefined };
}

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    throw badRequest('the body of the request was in an unknown format - accepted media types include: application/json, application/yaml');
  }
}

/** The object as served at `version` (objects are shared between versions). */
const present = (t: ResourceType, version: string, o: StoredObject): StoredObject => ({ ...o, apiVersion: groupVersion(t.group, version), kind: t.kind });

export function genericRoute(ctx: GenericContext, e: KubeRequest, res: ServerResponse, target: GenericTarget): [number, unknown] | 'streaming' {
  const { type: t, version, ns, name, sub } = target;
  const store = ctx.resources;
  const authz = (verb: Verb): void => authorize(ctx.access, e, verb, t.plural, ns, name, t.group);
  const dryRun = e.query.dryRun === 'All';
  const strict = e.query.fieldValidation === 'Strict';
  const table = wantsTable(e.accept);
  const tableOf = (objects: StoredObject[], metadata: Record<string, unknown>): Record<string, unknown> =>
    toTable(
      objects.map((o) => present(t, version, o)),
      { columns: t.printerColumns?.[version], includeObject: e.query.includeObject, metadata },
    );

  if (name === undefined) {
    if (e.method === 'GET') {
      const q = e.query;
      if (q.watch === 'true' || q.watch === '1') {
        authz('watch');
        return watch(ctx, e, res, target, table);
      }
      authz('list');
      const list = listObjects(
        `${t.kind}List`,
        store.list(t, ns) as never[],
        { labelSelector: q.labelSelector, fieldSelector: q.fieldSelector, limit: q.limit, continue: q.continue },
        store.pods.resourceVersion(),
        ctx.continueEpoch,
      );
      if (table) {
        const { continue: c, remainingItemCount: r, resourceVersion } = list.metadata;
        return [
          200,
          tableOf(list.items as StoredObject[], { resourceVersion, ...(c ? { continue: c } : {}), ...(r !== undefined ? { remainingItemCount: r } : {}) }),
        ];
      }
      // Custom resources' list items keep apiVersion and kind (they are unstructured).
      const items = t.schemas ? (list.items as StoredObject[]).map((o) => present(t, version, o)) : list.items;
      return [200, { ...list, apiVersion: groupVersion(t.group, version), items }];
    }
    if (e.method === 'POST') {
      if (t.namespaced && ns === undefined) throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
      authz('create');
      return [201, present(t, version, store.create(t, ns, version, parseJson(e.body), { dryRun, strict }))];
    }
    throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
  }

  const part = sub ?? 'main';
  if (e.method === 'GET') {
    authz('get');
    const o = store.get(t, ns, name);
    if (!o) throw notFoundIn(t, name);
    return [200, table ? tableOf([o], { resourceVersion: o.metadata.resourceVersion }) : present(t, version, o)];
  }
  if (e.method === 'PUT') {
    authz('update');
    return [200, present(t, version, store.update(t, ns, name, version, parseJson(e.body), part, { dryRun, strict, requireRv: true }))];
  }
  if (e.method === 'PATCH') return patch(ctx, e, target, authz, { dryRun, strict });
  if (e.method === 'DELETE' && sub === undefined) {
    authz('delete');
    const opts = (e.body ? parseJson(e.body) : {}) as {
      dryRun?: string[];
      preconditions?: { uid?: string; resourceVersion?: string };
      orphanDependents?: boolean;
    };
    const [o, removed] = store.delete(t, ns, name, {
      dryRun: dryRun || (opts.dryRun ?? []).includes('All'),
      ...(opts.preconditions?.uid ? { uid: opts.preconditions.uid } : {}),
      ...(opts.preconditions?.resourceVersion ? { resourceVersion: opts.preconditions.resourceVersion } : {}),
    });
    if (!removed) return [opts.orphanDependents === false ? 202 : 200, present(t, version, o)];
    if (t.deleteReturnsObject) return [200, present(t, version, o)];
    return [
      200,
      {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Success',
        details: { name, ...(t.group ? { group: t.group } : {}), kind: t.plural, uid: o.metadata.uid },
      },
    ];
  }
  throw new StatusError(status(405, 'MethodNotAllowed', NOT_ALLOWED));
}

function patch(
  ctx: GenericContext,
  e: KubeRequest,
  target: GenericTarget,
  authz: (verb: Verb) => void,
  opts: { dryRun: boolean; strict: boolean },
): [number, unknown] {
  const { type: t, version, ns, sub } = target;
  const name = target.name!;
  const store = ctx.resources;
  authz('patch');
  const contentType = (e.contentType ?? '').split(';')[0]!.trim();
  const part = sub ?? 'main';
  if (contentType === 'application/apply-patch+yaml') {
    if (!e.query.fieldManager) throw badRequest('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch');
    let applied: unknown;
    try {
      applied = parseYaml(e.body) as unknown;
    } catch (err) {
      throw badRequest(`error decoding YAML: ${(err as Error).message}`);
    }
    if (!applied || typeof applied !== 'object' || Array.isArray(applied)) throw badRequest('error decoding YAML: the body is not an object');
    const cur = store.get(t, ns, name);
    if (!cur) {
      if (sub) throw notFoundIn(t, name);
      const body = applied as { metadata?: Record<string, unknown> };
      authz('create');
      return [201, present(t, version, store.create(t, ns, version, { ...body, metadata: { ...body.metadata, name } }, opts))];
    }
    const merged = applyMerge(cur, applied, t.schemas?.[version]) as Record<string, unknown>;
    // An apply never carries a precondition unless the applier set one.
    const appliedRv = (applied as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
    (merged.metadata as Record<string, unknown>).resourceVersion = appliedRv ?? cur.metadata.resourceVersion;
    return [200, present(t, version, store.update(t, ns, name, version, merged, part, opts))];
  }
  if (contentType === 'application/strategic-merge-patch+json' && t.schemas) {
    throw new StatusError(
      status(
        415,
        'UnsupportedMediaType',
        'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
      ),
    );
  }
  const cur = store.get(t, ns, name);
  if (!cur) throw notFoundIn(t, name);
  const patched = applyPatch(cur as never, e.contentType, e.body, e.query.fieldManager);
  return [200, present(t, version, store.update(t, ns, name, version, patched, part, opts))];
}

function watch(ctx: GenericContext, e: KubeRequest, res: ServerResponse, target: GenericTarget, table: boolean): 'streaming' {
  const { type: t, version, ns } = target;
  const store = ctx.resources;
  const key = typeKey(t);
  const q = e.query;
  const source: WatchSource<StoredObject> = {
    current: () => store.list(t, ns),
    events: () => store.events.filter((ev) => ev.resource === key),
    oldestWatchableRv: () => store.oldestWatchableRv(),
    resourceVersion: () => store.pods.resourceVersion(),
    subscribe: (deliver) => {
      const listener = (ev: ResourceEvent): void => {
        if (ev.resource === key) deliver(ev);
      };
      store.on('change', listener);
      return () => store.off('change', listener);
    },
    bookmark: { kind: t.kind, apiVersion: groupVersion(t.group, version) },
    render: (o, first) =>
      table
        ? toTable([present(t, version, o)], {
            columns: t.printerColumns?.[version],
            includeObject: q.includeObject,
            noHeaders: !first,
            metadata: { resourceVersion: o.metadata.resourceVersion },
          })
        : present(t, version, o),
  };
  // Field and label selectors as lists apply them (metadata.name / metadata.namespace).
  const probe = (o: StoredObject): boolean =>
    listObjects('', [o] as never[], { labelSelector: q.labelSelector, fieldSelector: q.fieldSelector }, '', 0).items.length === 1;
  probe({ metadata: { name: '', uid: '', resourceVersion: '', creationTimestamp: '' } });
  streamWatch(
    source,
    (o) => (ns === undefined || o.metadata.namespace === ns) && probe(o),
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
