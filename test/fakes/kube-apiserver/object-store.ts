/**
 * Namespaced objects other than Pods (Secrets, Services) as the fake stores them: create, get, replace
 * (PUT), delete and list, under the PodStore's global resourceVersion and namespaces. What differs per kind
 * (validation, defaults, allocation) is in its `KindRules` (secret-rules.ts, service-rules.ts).
 * No watch on these kinds; PATCH is routes.ts applying patch.ts then a replace.
 */
import { randomUUID } from 'node:crypto';
import { labelErrors } from './object-meta-rules.ts';
import { canonical } from './pod-rules.ts';
import type { PodStore } from './pod-store.ts';
import { alreadyExists, badRequest, invalid, notFound, status, StatusError } from './status.ts';
import type { FakeObjectMeta } from './types.ts';

export interface FakeObject {
  apiVersion?: string;
  kind?: string;
  metadata: FakeObjectMeta;
  [k: string]: unknown;
}

/** A body as a client sent it, before the server filled anything in. */
export type IncomingObject = Record<string, unknown> & { metadata?: Partial<FakeObject['metadata']> };

export interface KindRules {
  kind: string;
  plural: string;
  /** Validates and defaults a new object (name already checked); throws a StatusError. */
  onCreate(name: string, obj: IncomingObject): IncomingObject;
  /** Validates and defaults a replacement of `cur`; throws a StatusError. */
  onUpdate(name: string, cur: FakeObject, obj: IncomingObject): IncomingObject;
  /** Releases what the object held (Service IPs and ports). */
  onDelete?(obj: FakeObject): void;
  /** Fields a PUT never changes (a status subresource). */
  keepOnUpdate?: readonly string[];
  /** DELETE answers a Status "Success" instead of the deleted object (the real store's ReturnDeletedObject: false). */
  deleteReturnsStatus?: boolean;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const clone = <T>(v: T): T => structuredClone(v);
const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

/** The RFC 1123 subdomain check most kinds use for names (422 otherwise). */
export function validateSubdomainName(kind: string, name: string): void {
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    throw invalid(kind, name, [
      {
        field: 'metadata.name',
        message: `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      },
    ]);
  }
}

export class ObjectStore {
  private readonly objects = new Map<string, FakeObject>();

  constructor(
    private readonly pods: PodStore,
    readonly rules: KindRules,
  ) {}

  private key(ns: string, name: string): string {
    return `${ns}/${name}`;
  }

  get(ns: string, name: string): FakeObject | undefined {
    const o = this.objects.get(this.key(ns, name));
    return o ? clone(o) : undefined;
  }

  /** Objects in key order (namespace/name), optionally in one namespace. Returned objects are copies. */
  list(ns?: string): FakeObject[] {
    return [...this.objects.entries()]
      .filter(([, o]) => ns === undefined || o.metadata.namespace === ns)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, o]) => clone(o));
  }

  count(ns: string): number {
    return this.list(ns).length;
  }

  /** POST semantics: validation, defaults, 404 for a missing namespace, 409 AlreadyExists; `dryRun` stores nothing. */
  create(ns: string, body: unknown, dryRun = false): FakeObject {
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body of the request was in an unknown format');
    const obj = clone(body) as IncomingObject;
    const meta = obj.metadata ?? {};
    if (meta.namespace && meta.namespace !== ns) throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    if (meta.resourceVersion) throw new StatusError(status(500, '', 'resourceVersion should not be set on objects to be created'));
    let name = meta.name;
    if (!name && typeof meta.generateName === 'string') name = meta.generateName + randomUUID().replace(/-/g, '').slice(0, 5);
    if (!name) {
      throw invalid(this.rules.kind, '', [
        { field: 'metadata.name', message: 'Required value: name or generateName is required', reason: 'FieldValueRequired' },
      ]);
    }
    const badLabels = labelErrors(meta.labels);
    if (badLabels.length) throw invalid(this.rules.kind, name, badLabels);
    const prepared = this.rules.onCreate(name, obj);
    // What onCreate allocated (Service IPs and ports) is released when the create fails after it.
    if (!this.pods.namespaces.has(ns)) {
      this.rules.onDelete?.(prepared as FakeObject);
      throw new StatusError(status(404, 'NotFound', `namespaces "${ns}" not found`, { name: ns, kind: 'namespaces' }));
    }
    if (this.objects.has(this.key(ns, name))) {
      this.rules.onDelete?.(prepared as FakeObject);
      throw alreadyExists(this.rules.plural, name);
    }
    const o: FakeObject = {
      ...prepared,
      apiVersion: 'v1',
      kind: this.rules.kind,
      metadata: { ...meta, name, namespace: ns, uid: randomUUID(), resourceVersion: dryRun ? '' : this.pods.nextResourceVersion(), creationTimestamp: now() },
    };
    delete o.metadata.deletionTimestamp;
    if (dryRun) this.rules.onDelete?.(o);
    else this.objects.set(this.key(ns, name), o);
    return clone(o);
  }

  /**
   * PUT semantics. A `metadata.resourceVersion` in the body is a precondition (409 Conflict when stale);
   * without one the update is unconditional (these kinds allow that). Server-set metadata is kept; a write
   * that changes nothing keeps the resourceVersion.
   */
  replace(ns: string, name: string, body: unknown): FakeObject {
    const key = this.key(ns, name);
    const cur = this.objects.get(key);
    if (!cur) throw notFound(this.rules.plural, name);
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body of the request was in an unknown format');
    const obj = clone(body) as IncomingObject;
    const meta = obj.metadata ?? {};
    if (meta.name !== undefined && meta.name !== name) {
      throw badRequest(`the name of the object (${meta.name}) does not match the name on the URL (${name})`);
    }
    if (meta.resourceVersion && meta.resourceVersion !== cur.metadata.resourceVersion) {
      throw new StatusError(
        status(
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${this.rules.plural} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          {
            name,
            kind: this.rules.plural,
          },
        ),
      );
    }
    const badLabels = labelErrors(meta.labels);
    if (badLabels.length) throw invalid(this.rules.kind, name, badLabels);
    const prepared = this.rules.onUpdate(name, clone(cur), obj);
    const next: FakeObject = { ...prepared, apiVersion: 'v1', kind: this.rules.kind, metadata: { ...cur.metadata } };
    for (const field of ['labels', 'annotations', 'finalizers', 'ownerReferences'] as const) {
      if (meta[field] === undefined) delete next.metadata[field];
      else next.metadata[field] = clone(meta[field]) as never;
    }
    for (const field of this.rules.keepOnUpdate ?? []) {
      if (cur[field] === undefined) delete next[field];
      else next[field] = clone(cur[field]);
    }
    if (canonical(next) === canonical(cur)) return clone(cur);
    next.metadata.resourceVersion = this.pods.nextResourceVersion();
    this.objects.set(key, next);
    return clone(next);
  }

  /** DELETE: 200 with the object as it was; 404 when missing. */
  delete(ns: string, name: string, dryRun = false): FakeObject {
    const key = this.key(ns, name);
    const o = this.objects.get(key);
    if (!o) throw notFound(this.rules.plural, name);
    if (dryRun) return clone(o);
    this.objects.delete(key);
    this.rules.onDelete?.(o);
    o.metadata.resourceVersion = this.pods.nextResourceVersion();
    return clone(o);
  }

  /** Test access: inserts an object as given (through the kind's create rules), bypassing the API. */
  seed(obj: { metadata: { name: string; namespace?: string; [k: string]: unknown }; [k: string]: unknown }): FakeObject {
    const ns = obj.metadata.namespace ?? 'default';
    this.pods.namespaces.add(ns);
    const { resourceVersion: _rv, uid, creationTimestamp, ...meta } = obj.metadata;
    const created = this.create(ns, { ...obj, metadata: meta });
    const stored = this.objects.get(this.key(ns, created.metadata.name))!;
    if (typeof uid === 'string') stored.metadata.uid = uid;
    if (typeof creationTimestamp === 'string') stored.metadata.creationTimestamp = creationTimestamp;
    return clone(stored);
  }

  /** Test access: changes an object in place (plays a controller), bumping its resourceVersion. */
  mutate(ns: string, name: string, change: (o: FakeObject) => void): FakeObject {
    const o = this.objects.get(this.key(ns, name));
    if (!o) throw notFound(this.rules.plural, name);
    change(o);
    o.metadata.resourceVersion = this.pods.nextResourceVersion();
    return clone(o);
  }
}
