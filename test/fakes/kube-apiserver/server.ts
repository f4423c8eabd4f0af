/**
 * A fake kube-apiserver for tests: a real HTTP server on 127.0.0.1:0, driven by the real
 * @kubernetes/client-node 1.4, stateful (every kind under one global resourceVersion).
 *
 * Implemented: core/v1 pods (list cluster-wide and namespaced, get, create, delete, watch, PUT and PATCH
 * on the Pod and on `/status`, see patch.ts); Status error objects; `Content-Type: application/json` on every
 * response; full label selector grammar (bad selector → 400); field selectors on metadata.name/namespace,
 * status.phase, spec.nodeName; `limit` + opaque `continue` + `remainingItemCount` (410 Expired after
 * `expireContinueTokens()`); 409 AlreadyExists; 404 NotFound (also for a missing namespace on create); 422
 * Invalid for names and containers; 500 with an empty reason for a resourceVersion on create; `dryRun=All`;
 * graceful deletion. Watch (watch.ts): synthetic ADDED without a resourceVersion, replay from a bounded
 * event log (`setEventLogSize`), 410 Expired as an ERROR event, selector exits as DELETED, bookmarks,
 * `timeoutSeconds`; client-node informers work unmodified. Optimistic concurrency on writes (422 without a
 * resourceVersion on PUT, 409 Conflict when stale, no-op writes keep the resourceVersion); Pod spec
 * immutability except images. Bearer-token authentication (401) and a per-token RBAC knob (403).
 * Request log, one-shot faults (on any route). Optional TLS with a self-signed certificate (`tls: true`);
 * kubectl 1.32 works against it (kubectl.test.ts, kubectl-crd.test.ts).
 * Secrets and Services (object-store.ts, secret-rules.ts, service-rules.ts): create, get, PUT (a stale
 * resourceVersion is 409 Conflict; none is an unconditional update, as these kinds allow), PATCH (patch.ts;
 * server-side apply creates), delete (a Secret's answers a Status, a Service's the object), list with
 * selectors, limit and continue. Secrets: `data` base64-decoded as Go does (bad base64 → 400 BadRequest),
 * config keys (422), `stringData` merged into `data` and not stored, type Opaque by default and immutable,
 * `immutable: true`. Services: cluster IPs from 10.96.0.0/12, unique node ports in 30000–32767 for
 * NodePort/LoadBalancer (taken or out of range → 422), released on delete; `status` kept by PUT;
 * `setServiceLoadBalancer` plays the cloud controller. RBAC rules per token, verb and resource (access.ts);
 * SelfSubjectAccessReview answers from those rules; ResourceQuota-like admission (`setQuota`) after
 * authorization: 403 Forbidden "exceeded quota: …".
 * CRDs and custom resources (crd-registry.ts, resource-store.ts, generic-routes.ts, structural-schema.ts):
 * apiextensions.k8s.io/v1 CustomResourceDefinitions (create/get/list/PUT/PATCH/delete, `kubectl apply`;
 * `<plural>.<group>` must be the name, one storage version, a schema per version → 422; NamesAccepted and
 * Established True right after the write); the CRD's types in discovery (`/apis`, `/apis/{g}/{v}` with short
 * names, categories, `{plural}/status`); custom resources namespaced or cluster-scoped: CRUD, list
 * semantics as above, PATCH (merge, JSON patch, server-side apply merging `x-kubernetes-list-type: map`
 * lists by key and creating a missing object; strategic merge → 415), `metadata.generation` bumped only on
 * changes outside metadata and status, resourceVersion preconditions (422 without one on PUT, 409 when
 * stale), status subresource, defaults + pruning + validation of the structural schema with the real
 * wording (`fieldValidation=Strict` → 400 for unknown fields), watch, `as=Table` answers built from
 * `additionalPrinterColumns` (also on watches: kubectl `get -w`). Finalizers and ownerReferences garbage
 * collection on every generically stored kind (and Secrets/Services as dependents; controllers.ts).
 * Built-in kinds stored generically (resource-types.ts): Namespace (create/delete), ServiceAccount,
 * ConfigMap, Role/RoleBinding/ClusterRole/ClusterRoleBinding, Deployment, StatefulSet, PodDisruptionBudget,
 * enough for `kubectl apply -f` (client-side and `--server-side`) of an install; a minimal OpenAPI v3
 * (openapi.ts) makes kubectl validate server-side rather than download schemas.
 *
 * Deviations from the real server:
 * - No aggregated discovery (legacy /api, /api/v1, /apis, /apis/{g}, /apis/{g}/{v} and /version, enough for
 *   kubectl); OpenAPI v3 documents carry no schemas (only each kind's PATCH operation) and there is no v2;
 *   no `sendInitialEvents`, no DELETE on collections, no `propagationPolicy` (always background).
 * - Tables: custom resources get their printer columns; Pods, Secrets and Services get none (kubectl
 *   prints them client-side); the other built-ins get NAME and AGE only (CRDs: NAME and CREATED AT).
 * - Strategic merge patch is applied as a JSON merge patch (lists replaced, no merge keys); server-side
 *   apply is a recursive merge (no managedFields, no removal of fields a manager stops applying, no
 *   conflicts between managers); on Pods, Secrets and Services it takes JSON only (custom resources and
 *   the generic kinds also take YAML).
 * - `continue` serves the current state, not the first page's snapshot (its resourceVersion is kept).
 * - `resourceVersion`/`resourceVersionMatch` on lists are ignored (always the latest state).
 * - Resource versions are numeric strings (clients must still treat them as opaque).
 * - Pod defaults are a subset (restartPolicy, dnsPolicy, grace period, imagePullPolicy, …); validation
 *   only checks names and that each container has a name and an image.
 * - Deletion: `auto` mode deletes a Pod with `spec.nodeName` gracefully and an unbound Pod at once (as
 *   the real server does without a kubelet); the grace period never expires by itself: a test calls
 *   `finishPodDeletion`. Pods take no `preconditions`.
 * - CRDs: no conversion webhooks (objects are shared between served versions, only `apiVersion` differs),
 *   no CEL rules (`x-kubernetes-validations`), no validation ratcheting, no name-conflict checks between
 *   CRDs, no scale subresource; deleting a CRD deletes its custom resources at once (no cleanup finalizer).
 *   Structural-schema checks cover type, properties, required, enum, min/maxLength, pattern, formats
 *   (date-time, date, byte, uuid, int32), minimum/maximum, min/maxItems, maxProperties, items,
 *   additionalProperties, nullable, anyOf/oneOf/allOf/not, int-or-string and list types map/set. A CRD's
 *   schema is checked for the common structural mistakes only (crd-schema-checks.ts).
 * - Built-in kinds stored generically are checked modestly: names, namespace exists, Deployment/StatefulSet
 *   selector and template (selector must match the template labels; replicas and revisionHistoryLimit
 *   defaulted), RBAC rule verbs and an immutable roleRef, PDB minAvailable xor maxUnavailable. No other
 *   defaults, no controllers (Deployments never get Pods or status), no unknown-field checks.
 * - Namespaces: deletion is immediate (no Terminating phase) and takes the namespace's generic objects,
 *   Secrets and Services with it, not its Pods. Garbage collection runs right after the owner is gone, in
 *   the same request (the real collector is asynchronous).
 * - Authorization rules are per token, verb and resource, either everywhere or at the cluster scope only
 *   (no particular namespaces, no resource names in rules); a
 *   SelfSubjectAccessReview for a non-resource URL is always allowed; `denied` is never set (RBAC only
 *   allows or has no opinion).
 * - Quota counts objects only (no compute resources, no scopes), is checked before validation, and is
 *   not reported as a ResourceQuota object.
 * - JSON only: no protobuf request bodies (kubectl's typed commands such as `create secret generic` and
 *   `auth can-i` send protobuf; they get 400 here).
 * - Secrets and Services: no watch, no PUT on `/status` (GET of a Service's `/status` works), no Secret
 *   type-specific validation (tls, dockerconfigjson), no Service dual-stack or ExternalName checks; a
 *   Secret's size limit counts keys and decoded values.
 */
import { delayUnlessClosed, sendJson, takeFault, watchClientAbort } from '../http-plumbing.ts';
import { misbehave, quotedRefusal, withStuckPageToken, type Misbehaviour } from '../misbehaviour.ts';
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import type { AccessState, DenyRule } from './access.ts';
import { runControllers } from './controllers.ts';
import { admitCrd, CRD_KEY, watchCrds } from './crd-registry.ts';
import { ObjectStore, type FakeObject } from './object-store.ts';
import { PodStore } from './pod-store.ts';
import { ResourceStore, notFoundIn, type StoredObject } from './resource-store.ts';
import { builtinTypes, groupVersion, type ResourceType } from './resource-types.ts';
import { route, type RouteContext, type Verb } from './routes.ts';
import { secretRules } from './secret-rules.ts';
import { serviceRules } from './service-rules.ts';
import { status, StatusError, type KubeStatus } from './status.ts';
import { selfSignedCert, type SelfSignedCert } from './tls.ts';
import type { KubeFault, KubeRequest } from './types.ts';

export type { KubeFault, KubeRequest };

export interface FakeKubeOptions {
  /** Serve HTTPS with a fresh self-signed certificate for 127.0.0.1 (see `tlsCert`). */
  tls?: boolean;
  /** Accepted bearer tokens → user name. Default `{ 'fake-token': 'system:serviceaccount:egress:operator' }`. */
  tokens?: Record<string, string>;
}

export class FakeKubeApiserver extends EventEmitter {
  readonly store = new PodStore();
  /** Secrets and Services, under the Pod store's resourceVersion and namespaces. */
  readonly secrets = new ObjectStore(this.store, secretRules);
  readonly services = new ObjectStore(this.store, serviceRules());
  /** Custom resources, CRDs and the built-in kinds stored generically (resource-types.ts). */
  readonly resources = new ResourceStore(this.store);
  readonly requests: KubeRequest[] = [];
  readonly tokens: Map<string, string>;
  private readonly access: AccessState;
  private readonly faults: KubeFault[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private continueEpoch = 1;
  /** Materializes Namespace objects for namespaces known only by name (defaults, seeded objects). */
  private readonly ensureNamespaces: () => void;
  /** Knob: interval of BOOKMARK events on watches that allow them (0: none). */
  bookmarkIntervalMs = 0;
  private server!: Server;
  url = '';

  /** The server certificate (PEM, also the CA that trusts it) when started with `tls: true`. */
  readonly tlsCert: SelfSignedCert | undefined;

  constructor(options: FakeKubeOptions = {}) {
    super();
    this.tlsCert = options.tls ? selfSignedCert() : undefined;
    this.tokens = new Map(Object.entries(options.tokens ?? { 'fake-token': 'system:serviceaccount:egress:operator' }));
    this.access = { tokens: this.tokens, denied: new Map(), quotas: new Map() };
    for (const t of builtinTypes()) this.resources.register(t.plural === 'customresourcedefinitions' ? { ...t, admit: admitCrd } : t);
    watchCrds(this.resources);
    this.ensureNamespaces = runControllers(this.resources, [this.secrets, this.services]);
  }

  /** The first configured token. */
  get token(): string {
    return [...this.tokens.keys()][0] ?? '';
  }

  async start(): Promise<this> {
    const handler = (req: IncomingMessage, res: ServerResponse): void => void this.handle(req, res);
    this.server = this.tlsCert ? createTlsServer({ key: this.tlsCert.key, cert: this.tlsCert.cert }, handler) : createServer(handler);
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `${this.tlsCert ? 'https' : 'http'}://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    if (!this.server?.listening) return;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  /** A KubeConfig for this server with the given token (default: the first accepted one; `null`: none). */
  kubeConfig(token: string | null = this.token): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        this.tlsCert
          ? { name: 'fake', server: this.url, skipTLSVerify: false, caData: Buffer.from(this.tlsCert.cert).toString('base64') }
          : { name: 'fake', server: this.url, skipTLSVerify: true },
      ],
      users: [token === null ? { name: 'fake' } : { name: 'fake', token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
      currentContext: 'fake',
    });
    return kc;
  }

  /**
   * RBAC knob: the token gets 403 for these verbs (all verbs when omitted) on these resources (plurals:
   * `pods`, `secrets`, `services`, `selfsubjectaccessreviews`; all when omitted). Rules add up; a
   * SelfSubjectAccessReview answers from them. `clusterScopeOnly` denies only cluster-wide requests (lists
   * across namespaces), as for an identity whose grants are namespaced Roles.
   */
  forbid(token: string, verbs?: Verb[], resources?: string[], options: { clusterScopeOnly?: boolean } = {}): void {
    const rule: DenyRule = {
      ...(verbs ? { verbs: new Set(verbs) } : {}),
      ...(resources ? { resources: new Set(resources) } : {}),
      ...(options.clusterScopeOnly ? { clusterScopeOnly: true } : {}),
    };
    this.access.denied.set(token, [...(this.access.denied.get(token) ?? []), rule]);
  }

  /** Removes every deny rule of the token. */
  allow(token: string): void {
    this.access.denied.delete(token);
  }

  /**
   * ResourceQuota knob: at most `hard[plural]` objects of that kind in `namespace` (Pods count while not
   * Succeeded or Failed). A create over it is 403 Forbidden "exceeded quota", as the real admission answers.
   * `undefined` removes the quota.
   */
  setQuota(namespace: string, hard: Partial<Record<'pods' | 'secrets' | 'services', number>> | undefined, name = 'egress-quota'): void {
    if (hard === undefined) this.access.quotas.delete(namespace);
    else this.access.quotas.set(namespace, { name, hard: new Map(Object.entries(hard).filter((e): e is [string, number] => e[1] !== undefined)) });
  }

  /** Standing misbehaviour for the hostile-peer suite (../misbehaviour.ts); `{}` turns it off. */
  misbehaviour: Misbehaviour = {};

  injectFault(fault: KubeFault): void {
    this.faults.push(fault);
  }

  /** Makes every continue token issued so far answer 410 Expired. */
  expireContinueTokens(): void {
    this.continueEpoch += 1;
  }

  /** Resolves with the next request the server receives (after its body was read). */
  nextRequest(): Promise<KubeRequest> {
    return once(this, 'request').then(([r]) => r as KubeRequest);
  }

  /** Resolves with the next request whose client closed the connection before the answer. */
  nextClientAbort(): Promise<KubeRequest> {
    return once(this, 'client-abort').then(([r]) => r as KubeRequest);
  }

  // Direct state access.
  seedPod = (pod: Parameters<PodStore['seed']>[0]) => this.store.seed(pod);
  getPod = (ns: string, name: string) => this.store.get(ns, name);
  listPods = (ns?: string) => this.store.list(ns);
  setPodStatus = (ns: string, name: string, update: Parameters<PodStore['setStatus']>[2]) => this.store.setStatus(ns, name, update);
  finishPodDeletion = (ns: string, name: string) => this.store.finishDeletion(ns, name);
  seedSecret = (secret: Parameters<ObjectStore['seed']>[0]) => this.secrets.seed(secret);
  getSecret = (ns: string, name: string) => this.secrets.get(ns, name);
  listSecrets = (ns?: string) => this.secrets.list(ns);
  seedService = (service: Parameters<ObjectStore['seed']>[0]) => this.services.seed(service);
  getService = (ns: string, name: string) => this.services.get(ns, name);
  listServices = (ns?: string) => this.services.list(ns);

  /**
   * Registers a CustomResourceDefinition as a POST of it would (same checks; a StatusError when invalid);
   * its type is served at once and its status becomes Established right after.
   */
  registerCrd(crd: object): StoredObject {
    return this.resources.create(this.resources.types.get(CRD_KEY)!, undefined, 'v1', crd);
  }

  private typeOf(group: string, version: string, plural: string): ResourceType {
    const t = this.resources.find(group, version, plural);
    if (!t) throw new Error(`no type serves ${groupVersion(group, version)} ${plural}`);
    return t;
  }

  /** A stored object of a generically stored kind (custom resources, CRDs, RBAC, apps, …), as served at `version`. */
  getObject(group: string, version: string, plural: string, namespace: string | undefined, name: string): StoredObject | undefined {
    const o = this.resources.get(this.typeOf(group, version, plural), namespace, name);
    return o && { ...o, apiVersion: groupVersion(group, version) };
  }

  /** The stored objects of a kind in etcd key order (one namespace, or all). */
  listObjects(group: string, version: string, plural: string, namespace?: string): StoredObject[] {
    return this.resources.list(this.typeOf(group, version, plural), namespace).map((o) => ({ ...o, apiVersion: groupVersion(group, version) }));
  }

  /** Creates an object as a POST would (validation, defaults), adding its namespace when missing. */
  seedObject(
    group: string,
    version: string,
    plural: string,
    obj: { metadata: { name: string; namespace?: string; [k: string]: unknown }; [k: string]: unknown },
  ): StoredObject {
    const t = this.typeOf(group, version, plural);
    if (t.namespaced) this.store.namespaces.add(obj.metadata.namespace ?? 'default');
    return this.resources.create(t, t.namespaced ? (obj.metadata.namespace ?? 'default') : undefined, version, obj);
  }

  /**
   * Writes an object as a PUT would (`main`) or a PUT on `/status` (`status`), without authorization: plays a
   * controller (e.g. removing a finalizer, which deletes an object being deleted). No resourceVersion needed.
   */
  updateObject(
    group: string,
    version: string,
    plural: string,
    namespace: string | undefined,
    name: string,
    change: (o: StoredObject) => void,
    part: 'main' | 'status' = 'main',
  ): StoredObject {
    const t = this.typeOf(group, version, plural);
    const cur = this.resources.get(t, namespace, name);
    if (!cur) throw notFoundIn(t, name);
    change(cur);
    return this.resources.update(t, namespace, name, version, cur, part);
  }

  /** Knob: how many events the watch logs keep (Pods and generic kinds); a watch from older gets 410 Expired after the next writes. */
  setEventLogSize(n: number): void {
    this.store.eventLogSize = n;
    this.resources.eventLogSize = n;
  }

  /** Plays the cloud controller: sets `status.loadBalancer.ingress` of a Service. */
  setServiceLoadBalancer(ns: string, name: string, ingress: { ip?: string; hostname?: string }[]): FakeObject {
    return this.services.mutate(ns, name, (o) => {
      o.status = { loadBalancer: ingress.length ? { ingress: ingress.map((i) => ({ ...i })) } : {} };
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', 'http://fake');
    const entry: KubeRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      rawQuery: url.search.replace(/^\?/, ''),
      contentType: req.headers['content-type'],
      accept: req.headers.accept,
      authorization: req.headers.authorization,
      body: Buffer.concat(chunks).toString('utf8'),
      outcome: 'pending',
    };
    this.requests.push(entry);
    this.emit('request', entry);
    watchClientAbort(entry, res, () => this.emit('client-abort', entry));

    const fault = takeFault(this.faults, entry);
    if (fault?.latencyMs) {
      await delayUnlessClosed(fault.latencyMs, res, this.timers);
      if (entry.outcome !== 'pending') return;
    }
    if (fault?.destroySocket === 'before-headers') {
      entry.outcome = 'destroyed';
      req.socket.destroy();
      this.emit('destroyed', entry);
      return;
    }
    if (fault?.destroySocket === 'mid-body' || fault?.destroySocket === 'mid-body-fixed-length') {
      entry.outcome = 'destroyed';
      // Chunked, as the real server streams large lists. With a Content-Length instead, node-fetch 2 never
      // settles a body cut short: only the caller's AbortSignal ends such a request.
      const fixed = fault.destroySocket === 'mid-body-fixed-length' ? { 'Content-Length': '1000' } : {};
      res.writeHead(200, { 'Content-Type': 'application/json', ...fixed });
      res.write('{"kind":"PodList","apiVersion":"v1","items":[');
      setImmediate(() => {
        req.socket.destroy();
        this.emit('destroyed', entry);
      });
      return;
    }
    if (fault?.body !== undefined) {
      this.send(res, entry, 200, fault.body);
      return;
    }
    if (fault?.status) {
      const s = fault.status;
      this.send(res, entry, s, status(s, fault.reason ?? defaultReason(s), fault.message ?? `fault injected: ${s}`));
      return;
    }
    if (misbehave(this.misbehaviour, entry, res)) return;
    const quoted = quotedRefusal(this.misbehaviour, entry);
    if (quoted) {
      this.send(res, entry, quoted.status, status(quoted.status, quoted.reason, quoted.message));
      return;
    }
    try {
      const ctx: RouteContext = {
        store: this.store,
        secrets: this.secrets,
        services: this.services,
        access: this.access,
        continueEpoch: this.continueEpoch,
        bookmarkIntervalMs: this.bookmarkIntervalMs,
        resources: this.resources,
        ensureNamespaces: () => this.ensureNamespaces(),
      };
      const result = route(ctx, entry, res);
      if (result !== 'streaming')
        this.send(res, entry, result[0], entry.method === 'GET' ? withStuckPageToken(this.misbehaviour, result[1], 'continue') : result[1]);
    } catch (e) {
      if (e instanceof StatusError) this.send(res, entry, e.status.code, e.status);
      else this.send(res, entry, 500, status(500, 'InternalError', `Internal error occurred: ${String(e)}`));
    }
  }

  private send(res: ServerResponse, entry: KubeRequest, code: number, body: unknown): void {
    sendJson(res, entry, code, body);
  }
}

function defaultReason(code: number): string {
  const reasons: Record<number, string> = {
    400: 'BadRequest',
    401: 'Unauthorized',
    403: 'Forbidden',
    404: 'NotFound',
    409: 'Conflict',
    410: 'Expired',
    422: 'Invalid',
    429: 'TooManyRequests',
    500: 'InternalError',
    503: 'ServiceUnavailable',
    504: 'Timeout',
  };
  return reasons[code] ?? 'Unknown';
}

export type { KubeStatus };

/** Starts a fake apiserver on an ephemeral port. Close it with `close()` in afterEach/afterAll. */
export async function startFakeKubeApiserver(options: FakeKubeOptions = {}): Promise<FakeKubeApiserver> {
  return new FakeKubeApiserver(options).start();
}
