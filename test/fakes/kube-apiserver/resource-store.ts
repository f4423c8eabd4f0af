/**
 * Generic storage of the fake apiserver for custom resources and the built-in kinds without a store of
 * their own (resource-types.ts), under the PodStore's global resourceVersion and namespaces:
 * create / get / list / update (main resource or `/status`) / delete with `metadata.generation` (1, bumped
 * on changes outside metadata and a status subresource's `.status`), optimistic concurrency, finalizers
 * (DELETE sets `deletionTimestamp`; removing the last finalizer deletes; no new finalizers once deleting),
 * a bounded event log for watches, and `gone` events the server's garbage collector follows.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { labelErrors, schemaMetadataErrors } from './object-meta-rules.ts';
import type { PodStore } from './pod-store.ts';
import { groupVersion, qualified, qualifiedKind, type ResourceType, type StoredObject } from './resource-types.ts';
import { applyDefaults, prune, validate, type FieldError } from './structural-schema.ts';
import { badRequest, status, StatusError } from './status.ts';

export type { ResourceType, StoredObject };

export interface ResourceEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  /** `group/plural` of the object's type. */
  resource: string;
  object: StoredObject;
  prev?: StoredObject;
  rv: number;
}

export interface WriteOptions {
  dryRun?: boolean;
  /** `fieldValidation=Strict`: unknown fields are a 400 instead of being pruned silently. */
  strict?: boolean;
}

const clone = <T>(v: T): T => structuredClone(v);
const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** Metadata fields a client may set; the rest is the server's. */
const USER_META = ['labels', 'annotations', 'finalizers', 'ownerReferences', 'generateName'] as const;

export const typeKey = (t: Pick<ResourceType, 'group' | 'plural'>): string => `${t.group}/${t.plural}`;

/** A 422 Invalid Status as the real server words it for `kind` (`Kind.group "name" is invalid: …`). */
export function invalidObject(t: Pick<ResourceType, 'kind' | 'group'>, name: string, errors: FieldError[]): StatusError {
  const parts = errors.map((e) => `${e.field}: ${e.message}`);
  const summary = parts.length === 1 ? parts[0]! : `[${parts.join(', ')}]`;
  return new StatusError(
    status(422, 'Invalid', `${qualifiedKind(t)} "${name}" is invalid: ${summary}`, {
      name,
      ...(t.group ? { group: t.group } : {}),
      kind: t.kind,
      causes: errors.map((e) => ({ reason: e.reason, message: e.message, field: e.field })),
    }),
  );
}

export const notFoundIn = (t: ResourceType, name: string): StatusError =>
  new StatusError(status(404, 'NotFound', `${qualified(t)} "${name}" not found`, { name, ...(t.group ? { group: t.group } : {}), kind: t.plural }));

export const conflict = (t: ResourceType, name: string): StatusError =>
  new StatusError(
    status(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${qualified(t)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      { name, ...(t.group ? { group: t.group } : {}), kind: t.plural },
    ),
  );

/** Emits `change` (ResourceEvent) for each write and `gone` (type, object) when an object is really removed. */
export class ResourceStore extends EventEmitter {
  readonly types = new Map<string, ResourceType>();
  private readonly objects = new Map<string, Map<string, StoredObject>>();
  readonly events: ResourceEvent[] = [];
  /** Knob: how many events are kept; a watch from an older resourceVersion gets 410 Expired. */
  eventLogSize = 1000;
  private compactedRv = 0;

  constructor(readonly pods: PodStore) {
    super();
    this.setMaxListeners(0);
  }

  register(t: ResourceType): void {
    this.types.set(typeKey(t), t);
    if (!this.objects.has(typeKey(t))) this.objects.set(typeKey(t), new Map());
  }

  /** Forgets a type and its objects (a CRD deleted), emitting DELETED for each. */
  unregister(key: string): void {
    const t = this.types.get(key);
    if (!t) return;
    for (const o of this.list(t)) this.remove(t, o);
    this.types.delete(key);
    this.objects.delete(key);
  }

  /** The type serving `group`/`version`/`plural`. */
  find(group: string, version: string, plural: string): ResourceType | undefined {
    const t = this.types.get(`${group}/${plural}`);
    return t && t.versions.includes(version) ? t : undefined;
  }

  oldestWatchableRv(): number {
    return Math.max(this.compactedRv, this.pods.oldestWatchableRv());
  }

  private bucket(t: ResourceType): Map<string, StoredObject> {
    const b = this.objects.get(typeKey(t));
    if (!b) throw new Error(`type ${typeKey(t)} is not registered`);
    return b;
  }

  private key(t: ResourceType, ns: string | undefined, name: string): string {
    return t.namespaced ? `${ns ?? ''}/${name}` : `/${name}`;
  }

  private record(t: ResourceType, type: ResourceEvent['type'], object: StoredObject, prev?: StoredObject): void {
    const ev: ResourceEvent = { type, resource: typeKey(t), object: clone(object), rv: Number(object.metadata.resourceVersion), ...(prev ? { prev } : {}) };
    this.events.push(ev);
    while (this.events.length > this.eventLogSize) this.compactedRv = this.events.shift()!.rv;
    this.emit('change', ev);
  }

  get(t: ResourceType, ns: string | undefined, name: string): StoredObject | undefined {
    const o = this.bucket(t).get(this.key(t, ns, name));
    return o ? clone(o) : undefined;
  }

  /** Objects in etcd key order (namespace/name), optionally in one namespace. Copies. */
  list(t: ResourceType, ns?: string): StoredObject[] {
    return [...this.bucket(t).entries()]
      .filter(([, o]) => ns === undefined || o.metadata.namespace === ns)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, o]) => clone(o));
  }

  /** Defaults, pruning and validation of a whole object (schema for custom resources, `admit` for built-ins). */
  private admit(t: ResourceType, obj: Record<string, unknown>, old: StoredObject | undefined, version: string, opts: WriteOptions): void {
    const name = (obj.metadata as { name: string }).name;
    const schema = t.schemas?.[version];
    const errors: FieldError[] = labelErrors((obj.metadata as { labels?: unknown }).labels);
    if (schema) {
      errors.push(...schemaMetadataErrors(obj.metadata, schema.properties?.metadata));
      applyDefaults(obj, schema);
      const pruned = prune(obj, schema);
      if (opts.strict && pruned.length > 0) {
        throw badRequest(`strict decoding error: ${pruned.map((p) => `unknown field "${p}"`).join(', ')}`);
      }
      errors.push(...validate(obj, { ...schema, properties: { ...schema.properties, metadata: { type: 'object' } } }));
    }
    errors.push(...(t.admit?.(obj, old) ?? []));
    if (errors.length > 0) throw invalidObject(t, name, errors);
  }

  private checkName(t: ResourceType, name: string): void {
    const bad =
      t.nameRule === 'label'
        ? name.length > 63 || !DNS_LABEL.test(name)
        : t.nameRule === 'subdomain'
          ? name.length > 253 || !DNS_SUBDOMAIN.test(name)
          : name === '.' || name === '..' || /[/%]/.test(name);
    if (!bad) return;
    const what =
      t.nameRule === 'label'
        ? `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`
        : t.nameRule === 'subdomain'
          ? `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
          : `may not contain '/' or '%' and may not be '.' or '..'`;
    throw invalidObject(t, name, [{ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}": ${what}` }]);
  }

  /** POST: 201 semantics (validation, 404 for a missing namespace, 409 AlreadyExists); `dryRun` stores nothing. */
  create(t: ResourceType, ns: string | undefined, version: string, body: unknown, opts: WriteOptions = {}): StoredObject {
    if (!isObject(body)) throw badRequest('the body of the request was in an unknown format');
    const obj = clone(body) as Record<string, unknown> & { metadata?: Record<string, unknown> };
    const meta = isObject(obj.metadata) ? obj.metadata : {};
    if (t.namespaced && meta.namespace && meta.namespace !== ns) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    if (meta.resourceVersion) throw new StatusError(status(500, '', 'resourceVersion should not be set on objects to be created'));
    let name = typeof meta.name === 'string' ? meta.name : '';
    if (!name && typeof meta.generateName === 'string') name = meta.generateName + randomUUID().replace(/-/g, '').slice(0, 5);
    if (!name) {
      throw invalidObject(t, '', [{ reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' }]);
    }
    this.checkName(t, name);
    const kept = Object.fromEntries(USER_META.filter((f) => meta[f] !== undefined).map((f) => [f, clone(meta[f])]));
    obj.metadata = { ...kept, name, ...(t.namespaced ? { namespace: ns } : {}) };
    if (t.statusSubresource && t.schemas) delete obj.status;
    this.admit(t, obj, undefined, version, opts);
    if (t.namespaced && !this.pods.namespaces.has(ns ?? '')) {
      throw new StatusError(status(404, 'NotFound', `namespaces "${ns}" not found`, { name: ns ?? '', kind: 'namespaces' }));
    }
    const b = this.bucket(t);
    if (b.has(this.key(t, ns, name))) {
      throw new StatusError(
        status(409, 'AlreadyExists', `${qualified(t)} "${name}" already exists`, { name, ...(t.group ? { group: t.group } : {}), kind: t.plural }),
      );
    }
    const o = {
      ...obj,
      apiVersion: groupVersion(t.group, version),
      kind: t.kind,
      metadata: {
        ...(obj.metadata as object),
        uid: randomUUID(),
        resourceVersion: opts.dryRun ? '' : this.pods.nextResourceVersion(),
        ...(t.generation ? { generation: 1 } : {}),
        creationTimestamp: now(),
      },
    } as StoredObject;
    if (!opts.dryRun) {
      b.set(this.key(t, ns, name), o);
      this.record(t, 'ADDED', o);
    }
    return clone(o);
  }

  /**
   * PUT (or the result of a PATCH) on the main resource or `/status`. A resourceVersion in the body is a
   * precondition (409 when stale); without one, 422 unless the kind allows unconditional updates.
   */
  update(
    t: ResourceType,
    ns: string | undefined,
    name: string,
    version: string,
    body: unknown,
    sub: 'main' | 'status',
    opts: WriteOptions & { requireRv?: boolean } = {},
  ): StoredObject {
    const b = this.bucket(t);
    const k = this.key(t, ns, name);
    const cur = b.get(k);
    if (!cur) throw notFoundIn(t, name);
    if (!isObject(body)) throw badRequest('the body of the request was in an unknown format');
    const obj: Record<string, unknown> = clone(body);
    const meta = isObject(obj.metadata) ? obj.metadata : {};
    if (meta.name !== undefined && meta.name !== name) {
      throw badRequest(
        `the name of the object (${typeof meta.name === 'string' ? meta.name : JSON.stringify(meta.name)}) does not match the name on the URL (${name})`,
      );
    }
    const rv = meta.resourceVersion;
    if (!rv && opts.requireRv && !t.unconditionalUpdate) {
      throw invalidObject(t, name, [
        { reason: 'FieldValueInvalid', field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' },
      ]);
    }
    if (rv && rv !== cur.metadata.resourceVersion) throw conflict(t, name);
    let next: Record<string, unknown>;
    if (sub === 'status') {
      next = { ...clone(cur), status: clone(obj.status) };
      if (obj.status === undefined) delete next.status;
    } else {
      next = { ...obj, metadata: { ...clone(cur.metadata) } };
      const nm = next.metadata as Record<string, unknown>;
      for (const f of USER_META) {
        if (meta[f] === undefined) delete nm[f];
        else nm[f] = clone(meta[f]);
      }
      if (t.statusSubresource) {
        if (cur.status === undefined) delete next.status;
        else next.status = clone(cur.status);
      }
    }
    const nm = next.metadata as StoredObject['metadata'];
    if (cur.metadata.deletionTimestamp) {
      const added = (nm.finalizers ?? []).filter((f) => !(cur.metadata.finalizers ?? []).includes(f));
      if (added.length > 0) {
        throw invalidObject(t, name, [
          {
            reason: 'FieldValueInvalid',
            field: 'metadata.finalizers',
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(', ')}}`,
          },
        ]);
      }
    }
    this.admit(t, next, clone(cur), version, opts);
    next.apiVersion = cur.apiVersion;
    next.kind = t.kind;
    const specOf = (o: Record<string, unknown>): string => {
      const { metadata: _m, status: s, apiVersion: _a, kind: _k, ...rest } = o;
      return JSON.stringify(t.statusSubresource ? rest : { ...rest, status: s });
    };
    if (t.generation && specOf(next) !== specOf(cur)) nm.generation = (cur.metadata.generation ?? 1) + 1;
    if (JSON.stringify(next) === JSON.stringify(cur)) return clone(cur);
    if (opts.dryRun) return clone(next as StoredObject);
    nm.resourceVersion = this.pods.nextResourceVersion();
    const stored = next as StoredObject;
    if (nm.deletionTimestamp && !nm.finalizers?.length) {
      b.delete(k);
      this.record(t, 'DELETED', stored);
      this.emit('gone', t, clone(stored));
      return clone(stored);
    }
    b.set(k, stored);
    this.record(t, 'MODIFIED', stored, clone(cur));
    return clone(stored);
  }

  /**
   * DELETE: with finalizers the object stays with `deletionTimestamp` (and `deletionGracePeriodSeconds: 0`),
   * as a MODIFIED event; otherwise it is removed (DELETED) and `gone` is emitted. Answers the object as it is
   * now and whether it was really removed.
   */
  delete(t: ResourceType, ns: string | undefined, name: string, opts: WriteOptions & { uid?: string; resourceVersion?: string } = {}): [StoredObject, boolean] {
    const b = this.bucket(t);
    const k = this.key(t, ns, name);
    const cur = b.get(k);
    if (!cur) throw notFoundIn(t, name);
    if (opts.uid !== undefined && opts.uid !== cur.metadata.uid) {
      throw new StatusError(
        status(
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${qualified(t)} "${name}": Precondition failed: UID in precondition: ${opts.uid}, UID in object meta: ${cur.metadata.uid}`,
          { name, ...(t.group ? { group: t.group } : {}), kind: t.plural },
        ),
      );
    }
    if (opts.resourceVersion !== undefined && opts.resourceVersion !== cur.metadata.resourceVersion) throw conflict(t, name);
    if (opts.dryRun) return [clone(cur), false];
    if (cur.metadata.finalizers?.length) {
      if (cur.metadata.deletionTimestamp) return [clone(cur), false];
      const prev = clone(cur);
      cur.metadata.deletionTimestamp = now();
      cur.metadata.deletionGracePeriodSeconds = 0;
      cur.metadata.resourceVersion = this.pods.nextResourceVersion();
      this.record(t, 'MODIFIED', cur, prev);
      return [clone(cur), false];
    }
    return [this.remove(t, cur), true];
  }

  private remove(t: ResourceType, o: StoredObject): StoredObject {
    this.bucket(t).delete(this.key(t, o.metadata.namespace, o.metadata.name));
    const gone = clone(o);
    gone.metadata.resourceVersion = this.pods.nextResourceVersion();
    this.record(t, 'DELETED', gone);
    this.emit('gone', t, clone(gone));
    return clone(gone);
  }

  /** Test access: changes an object in place (plays a controller), bumping its resourceVersion (MODIFIED). */
  mutate(t: ResourceType, ns: string | undefined, name: string, change: (o: StoredObject) => void): StoredObject {
    const o = this.bucket(t).get(this.key(t, ns, name));
    if (!o) throw notFoundIn(t, name);
    const prev = clone(o);
    change(o);
    o.metadata.resourceVersion = this.pods.nextResourceVersion();
    this.record(t, 'MODIFIED', o, prev);
    return clone(o);
  }
}
