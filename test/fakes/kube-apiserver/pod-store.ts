/**
 * The fake apiserver's state: namespaces and Pods under one global resourceVersion, kept in etcd key order
 * (namespace/name). No kubelet and no scheduler: a Pod stays `Pending` until a test sets its phase.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { labelErrors } from './object-meta-rules.ts';
import { applySpecDefaults, canonical, validatePod } from './pod-rules.ts';
import type { FakePod } from './types.ts';
import { alreadyExists, badRequest, invalid, notFound, status, StatusError } from './status.ts';

export type { FakePod };

export interface PodStatusUpdate {
  phase?: 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';
  podIP?: string;
  ready?: boolean;
  /** Scheduled node; set to `fake-node` when a phase other than Pending is set without one. */
  nodeName?: string;
  reason?: string;
  message?: string;
}

const clone = <T>(v: T): T => structuredClone(v);
const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

export type DeletionMode = 'auto' | 'graceful' | 'immediate';

/** A change as watchers see it; `prev` is the object before a modification (to detect selector exits). */
export interface PodEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: FakePod;
  prev?: FakePod;
  rv: number;
}

/** Emits `change` with each PodEvent. */
export class PodStore extends EventEmitter {
  private rv = 1000;
  /** The bounded event history watches replay from (oldest first). */
  readonly events: PodEvent[] = [];
  /** Knob: how many events are kept; a watch from an older resourceVersion gets 410 Expired. */
  eventLogSize = 1000;
  /** Resource version of the oldest change the log can no longer replay. */
  private compactedRv = 1000;
  private readonly pods = new Map<string, FakePod>();
  readonly namespaces = new Set<string>(['default', 'kube-system', 'kube-public']);
  /**
   * `auto` (the real behaviour): a Pod bound to a node (`spec.nodeName`) is deleted gracefully, keeping
   * `deletionTimestamp` until `finishDeletion`; an unbound one vanishes at once. `graceful` / `immediate` force it.
   */
  deletionMode: DeletionMode = 'auto';

  /** The current global resourceVersion (an opaque string to clients). */
  resourceVersion(): string {
    return String(this.rv);
  }

  /** Takes the next global resourceVersion (for the other kinds' stores, which share it). */
  nextResourceVersion(): string {
    return this.bump();
  }

  private bump(): string {
    this.rv += 1;
    return String(this.rv);
  }

  /** The oldest resourceVersion a watch may start from (inclusive). */
  oldestWatchableRv(): number {
    return this.compactedRv;
  }

  private record(type: PodEvent['type'], pod: FakePod, prev?: FakePod): void {
    const ev: PodEvent = { type, object: clone(pod), rv: Number(pod.metadata.resourceVersion), ...(prev ? { prev } : {}) };
    this.events.push(ev);
    while (this.events.length > this.eventLogSize) this.compactedRv = this.events.shift()!.rv;
    this.emit('change', ev);
  }

  private key(ns: string, name: string): string {
    return `${ns}/${name}`;
  }

  get(ns: string, name: string): FakePod | undefined {
    const p = this.pods.get(this.key(ns, name));
    return p ? clone(p) : undefined;
  }

  /** Pods in key order, optionally in one namespace. Returned objects are copies. */
  list(ns?: string): FakePod[] {
    return [...this.pods.entries()]
      .filter(([, p]) => ns === undefined || p.metadata.namespace === ns)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, p]) => clone(p));
  }

  /** Creates a Pod the way POST does (validation, defaults, conflicts); `dryRun` stores nothing. */
  create(ns: string, body: unknown, dryRun = false): FakePod {
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body of the request was in an unknown format');
    const obj = clone(body) as Partial<FakePod> & { metadata?: Partial<FakePod['metadata']> };
    const meta = (obj.metadata ?? {}) as Partial<FakePod['metadata']>;
    if (meta.namespace && meta.namespace !== ns) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    if (meta.resourceVersion) {
      throw new StatusError(status(500, '', 'resourceVersion should not be set on objects to be created'));
    }
    let name = meta.name;
    if (!name && meta.generateName) name = meta.generateName + randomUUID().replace(/-/g, '').slice(0, 5);
    if (!name)
      throw invalid('Pod', '', [{ field: 'metadata.name', message: 'Required value: name or generateName is required', reason: 'FieldValueRequired' }]);
    validatePod(name, obj.spec);
    const badLabels = labelErrors(meta.labels);
    if (badLabels.length) throw invalid('Pod', name, badLabels);
    if (!this.namespaces.has(ns)) {
      throw new StatusError(status(404, 'NotFound', `namespaces "${ns}" not found`, { name: ns, kind: 'namespaces' }));
    }
    if (this.pods.has(this.key(ns, name))) throw alreadyExists('pods', name);
    const pod: FakePod = {
      apiVersion: 'v1',
      kind: 'Pod',
      ...obj,
      metadata: {
        ...meta,
        name,
        namespace: ns,
        uid: randomUUID(),
        resourceVersion: dryRun ? '' : this.bump(),
        creationTimestamp: now(),
      },
      spec: applySpecDefaults(obj.spec),
      status: { phase: 'Pending', qosClass: 'BestEffort' },
    };
    delete pod.metadata.deletionTimestamp;
    if (!dryRun) {
      this.pods.set(this.key(ns, name), pod);
      this.record('ADDED', pod);
    }
    return clone(pod);
  }

  /** DELETE semantics: immediate, or graceful (deletionTimestamp set, Pod kept) per `deletionMode`. */
  delete(ns: string, name: string, gracePeriodSeconds?: number, dryRun = false): FakePod {
    const key = this.key(ns, name);
    const pod = this.pods.get(key);
    if (!pod) throw notFound('pods', name);
    if (dryRun) return clone(pod);
    const grace = gracePeriodSeconds ?? (typeof pod.spec.terminationGracePeriodSeconds === 'number' ? pod.spec.terminationGracePeriodSeconds : 30);
    const hasFinalizers = (pod.metadata.finalizers?.length ?? 0) > 0;
    const graceful = grace > 0 && (this.deletionMode === 'graceful' || (this.deletionMode === 'auto' && Boolean(pod.spec.nodeName)));
    if (pod.metadata.deletionTimestamp) {
      // Already terminating: a force delete (gracePeriodSeconds=0) removes it unless finalizers remain.
      if (grace === 0 && !hasFinalizers) {
        this.pods.delete(key);
        pod.metadata.resourceVersion = this.bump();
        this.record('DELETED', pod);
      }
      return clone(pod);
    }
    if (graceful || hasFinalizers) {
      const prev = clone(pod);
      pod.metadata.deletionTimestamp = new Date(Date.now() + (graceful ? grace : 0) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      pod.metadata.deletionGracePeriodSeconds = graceful ? grace : 0;
      pod.metadata.resourceVersion = this.bump();
      this.record('MODIFIED', pod, prev);
      return clone(pod);
    }
    this.pods.delete(key);
    pod.metadata.resourceVersion = this.bump();
    this.record('DELETED', pod);
    return clone(pod);
  }

  /**
   * PUT/PATCH semantics. `subresource: 'status'` changes only `.status`; the main resource ignores
   * `.status`, keeps server-set metadata, and allows only container images to change in `spec` (as for
   * real Pods). A `metadata.resourceVersion` in `body` is a precondition (409 when stale); `requireRv`
   * (PUT) makes it mandatory (422). A write that changes nothing keeps the resourceVersion.
   */
  update(ns: string, name: string, body: unknown, subresource: 'main' | 'status', requireRv: boolean): FakePod {
    const key = this.key(ns, name);
    const cur = this.pods.get(key);
    if (!cur) throw notFound('pods', name);
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the body of the request was in an unknown format');
    const obj = body as Partial<FakePod> & { metadata?: Partial<FakePod['metadata']> };
    const rv = obj.metadata?.resourceVersion;
    if (obj.metadata?.name !== undefined && obj.metadata.name !== name) {
      throw badRequest(`the name of the object (${obj.metadata.name}) does not match the name on the URL (${name})`);
    }
    if (requireRv && !rv) {
      throw invalid('Pod', name, [{ field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' }]);
    }
    if (rv && rv !== cur.metadata.resourceVersion) {
      throw new StatusError(
        status(
          409,
          'Conflict',
          `Operation cannot be fulfilled on pods "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          { name, kind: 'pods' },
        ),
      );
    }
    const next = clone(cur);
    if (subresource === 'status') {
      next.status = clone(obj.status ?? {});
    } else {
      const m: Record<string, unknown> = obj.metadata ?? {};
      const badLabels = labelErrors(m.labels);
      if (badLabels.length) throw invalid('Pod', name, badLabels);
      for (const field of ['labels', 'annotations', 'finalizers', 'ownerReferences'] as const) {
        if (m[field] === undefined) delete next.metadata[field];
        else next.metadata[field] = clone(m[field]) as never;
      }
      const spec = clone(obj.spec ?? cur.spec);
      const comparable = (sp: FakePod['spec']): string => canonical({ ...sp, containers: sp.containers.map(({ image: _i, ...c }) => c) });
      if (!Array.isArray(spec.containers) || comparable(spec) !== comparable(cur.spec)) {
        throw invalid('Pod', name, [
          {
            field: 'spec',
            message:
              'Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
            reason: 'FieldValueForbidden',
          },
        ]);
      }
      next.spec = spec;
    }
    if (canonical(next) === canonical(cur)) return clone(cur);
    const prev = clone(cur);
    next.metadata.resourceVersion = this.bump();
    if (next.metadata.deletionTimestamp && !next.metadata.finalizers?.length && next.metadata.deletionGracePeriodSeconds === 0) {
      this.pods.delete(key);
      this.record('DELETED', next);
      return clone(next);
    }
    this.pods.set(key, next);
    this.record('MODIFIED', next, prev);
    return clone(next);
  }

  /** Test access: inserts a Pod directly (no validation beyond a name), setting server fields when absent. */
  seed(pod: { metadata: { name: string; namespace?: string; [k: string]: unknown }; spec?: unknown; status?: unknown }): FakePod {
    const ns = pod.metadata.namespace ?? 'default';
    this.namespaces.add(ns);
    const p = clone(pod) as unknown as FakePod;
    p.apiVersion = 'v1';
    p.kind = 'Pod';
    p.metadata.namespace = ns;
    p.metadata.uid ??= randomUUID();
    p.metadata.creationTimestamp ??= now();
    p.metadata.resourceVersion = this.bump();
    p.spec ??= { containers: [{ name: 'proxy', image: 'proxy:1' }] };
    p.status ??= { phase: 'Pending' };
    const key = this.key(ns, p.metadata.name);
    const prev = this.pods.get(key);
    this.pods.set(key, p);
    this.record(prev ? 'MODIFIED' : 'ADDED', p, prev);
    return clone(p);
  }

  /** Test access: plays kubelet. Sets phase, IP and the Ready condition; bumps the resourceVersion. */
  setStatus(ns: string, name: string, update: PodStatusUpdate): FakePod {
    const pod = this.pods.get(this.key(ns, name));
    if (!pod) throw notFound('pods', name);
    const prev = clone(pod);
    const s = pod.status;
    if (update.nodeName) pod.spec.nodeName = update.nodeName;
    if (update.phase) {
      s.phase = update.phase;
      if (update.phase !== 'Pending' && !pod.spec.nodeName) pod.spec.nodeName = 'fake-node';
      if (update.phase === 'Running' && !s.startTime) s.startTime = now();
    }
    if (update.reason !== undefined) s.reason = update.reason;
    if (update.message !== undefined) s.message = update.message;
    if (update.podIP !== undefined) {
      s.podIP = update.podIP;
      s.podIPs = [{ ip: update.podIP }];
    }
    if (update.ready !== undefined) {
      const conditions = (s.conditions ??= []);
      const value = update.ready ? 'True' : 'False';
      for (const type of ['Ready', 'ContainersReady']) {
        const c = conditions.find((x) => x.type === type);
        if (!c) conditions.push({ type, status: value, lastTransitionTime: now() });
        else if (c.status !== value) Object.assign(c, { status: value, lastTransitionTime: now() });
      }
    }
    pod.metadata.resourceVersion = this.bump();
    this.record('MODIFIED', pod, prev);
    return clone(pod);
  }

  /** Test access: plays kubelet/controllers finishing a graceful deletion (or dropping finalizers). */
  finishDeletion(ns: string, name: string): void {
    const key = this.key(ns, name);
    const pod = this.pods.get(key);
    if (!pod) throw notFound('pods', name);
    if (!pod.metadata.deletionTimestamp) throw new Error(`pod ${key} is not being deleted`);
    this.pods.delete(key);
    pod.metadata.resourceVersion = this.bump();
    this.record('DELETED', pod);
  }
}
