/**
 * A fake kube-apiserver for tests: a real HTTP server on 127.0.0.1:0, driven by the real
 * @kubernetes/client-node 1.4, stateful (Pods and namespaces under a global resourceVersion).
 *
 * Implemented: core/v1 pods (list cluster-wide and namespaced, get, create, delete) and namespaces (get,
 * list); Status error objects; `Content-Type: application/json` on every response; full label selector
 * grammar (bad selector → 400); field selectors on metadata.name/namespace, status.phase, spec.nodeName;
 * `limit` + opaque `continue` + `remainingItemCount` (410 Expired after `expireContinueTokens()`); 409
 * AlreadyExists; 404 NotFound (also for a missing namespace on create); 422 Invalid for names and
 * containers; 500 with an empty reason for a resourceVersion on create; `dryRun=All`; graceful deletion.
 * Bearer-token authentication (401) and a per-token RBAC knob (403). Request log, one-shot faults.
 *
 * Deviations from the real server:
 * - No watch, no PUT/PATCH, no `/status` subresource, no CRDs, no discovery documents (`watch=true` → 501).
 * - `continue` serves the current state, not the first page's snapshot (its resourceVersion is kept).
 * - `resourceVersion`/`resourceVersionMatch` on lists are ignored (always the latest state).
 * - Pod defaults are a subset (restartPolicy, dnsPolicy, grace period, imagePullPolicy, …); validation
 *   only checks names and that each container has a name and an image.
 * - Deletion: `auto` mode deletes a Pod with `spec.nodeName` gracefully and an unbound Pod at once (as
 *   the real server does without a kubelet); the grace period never expires by itself: a test calls
 *   `finishPodDeletion`. No `propagationPolicy`, no `preconditions`.
 * - Authorization is all-or-nothing per verb and token (no namespaces or resource names in rules).
 */
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { listPods } from './lists.ts';
import { PodStore } from './pod-store.ts';
import { badRequest, routeNotFound, status, StatusError, unauthorized, type KubeStatus } from './status.ts';

export interface KubeRequest {
  method: string;
  path: string;
  /** Decoded query parameters (last value wins) and the raw query string. */
  query: Record<string, string>;
  rawQuery: string;
  contentType: string | undefined;
  accept: string | undefined;
  authorization: string | undefined;
  body: string;
  /** The HTTP status written, once written. */
  status?: number;
  /** The response body written (JSON text), once written. */
  responseBody?: string;
  /** `served`, `client-aborted` (the client closed the socket first), `destroyed` (a fault). */
  outcome: 'pending' | 'served' | 'client-aborted' | 'destroyed';
}

export interface KubeFault {
  /** Only requests matching these apply; the first matching fault is used once and removed. */
  match?: { method?: string; path?: string | RegExp };
  /** Delay before answering (the answer is the fault status if any, otherwise the normal one). */
  latencyMs?: number;
  /**
   * `before-headers`: destroy the socket without answering; `mid-body`: send chunked headers and half a
   * body; `mid-body-fixed-length`: the same with a Content-Length (node-fetch 2 then never settles).
   */
  destroySocket?: 'before-headers' | 'mid-body' | 'mid-body-fixed-length';
  /** Answer with this status and a Status body (reason and message given or derived). */
  status?: number;
  reason?: string;
  message?: string;
}

export interface FakeKubeOptions {
  /** Accepted bearer tokens → user name. Default `{ 'fake-token': 'system:serviceaccount:egress:operator' }`. */
  tokens?: Record<string, string>;
}

type Verb = 'get' | 'list' | 'create' | 'delete' | 'watch';

export class FakeKubeApiserver extends EventEmitter {
  readonly store = new PodStore();
  readonly requests: KubeRequest[] = [];
  readonly tokens: Map<string, string>;
  private readonly denied = new Map<string, Set<Verb> | 'all'>();
  private readonly faults: KubeFault[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private continueEpoch = 1;
  private server!: Server;
  url = '';

  constructor(options: FakeKubeOptions = {}) {
    super();
    this.tokens = new Map(Object.entries(options.tokens ?? { 'fake-token': 'system:serviceaccount:egress:operator' }));
  }

  /** The first configured token. */
  get token(): string {
    return [...this.tokens.keys()][0] ?? '';
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
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
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }],
      users: [token === null ? { name: 'fake' } : { name: 'fake', token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
      currentContext: 'fake',
    });
    return kc;
  }

  /** RBAC knob: the token gets 403 for these verbs (all verbs when omitted). */
  forbid(token: string, verbs?: Verb[]): void {
    this.denied.set(token, verbs ? new Set(verbs) : 'all');
  }

  allow(token: string): void {
    this.denied.delete(token);
  }

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
    res.on('close', () => {
      if (entry.outcome === 'pending' && !res.writableFinished) {
        entry.outcome = 'client-aborted';
        this.emit('client-abort', entry);
      }
    });

    const fault = this.takeFault(entry);
    if (fault?.latencyMs) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          this.timers.delete(t);
          resolve();
        }, fault.latencyMs);
        this.timers.add(t);
        res.once('close', () => {
          clearTimeout(t);
          this.timers.delete(t);
          resolve();
        });
      });
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
    if (fault?.status) {
      const s = fault.status;
      this.send(res, entry, s, status(s, fault.reason ?? defaultReason(s), fault.message ?? `fault injected: ${s}`));
      return;
    }
    try {
      const [code, body] = this.route(entry);
      this.send(res, entry, code, body);
    } catch (e) {
      if (e instanceof StatusError) this.send(res, entry, e.status.code, e.status);
      else this.send(res, entry, 500, status(500, 'InternalError', `Internal error occurred: ${String(e)}`));
    }
  }

  private takeFault(entry: KubeRequest): KubeFault | undefined {
    const i = this.faults.findIndex((f) => {
      const m = f.match;
      if (!m) return true;
      if (m.method && m.method.toUpperCase() !== entry.method) return false;
      if (typeof m.path === 'string' && m.path !== entry.path) return false;
      if (m.path instanceof RegExp && !m.path.test(entry.path)) return false;
      return true;
    });
    return i >= 0 ? this.faults.splice(i, 1)[0] : undefined;
  }

  private send(res: ServerResponse, entry: KubeRequest, code: number, body: unknown): void {
    if (res.destroyed) return;
    entry.status = code;
    entry.outcome = 'served';
    const text = JSON.stringify(body);
    entry.responseBody = text;
    res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  }

  private authorize(entry: KubeRequest, verb: Verb, ns: string | undefined, name?: string): void {
    const token = entry.authorization?.startsWith('Bearer ') ? entry.authorization.slice(7) : undefined;
    const user = token === undefined ? undefined : this.tokens.get(token);
    if (token === undefined || user === undefined) throw new StatusError(unauthorized());
    const denied = this.denied.get(token);
    if (denied === 'all' || denied?.has(verb)) {
      const scope = ns === undefined ? 'at the cluster scope' : `in the namespace "${ns}"`;
      const what = name === undefined ? '' : ` "${name}"`;
      throw new StatusError(
        status(403, 'Forbidden', `pods${what} is forbidden: User "${user}" cannot ${verb} resource "pods" in API group "" ${scope}`, {
          ...(name === undefined ? {} : { name }),
          kind: 'pods',
        }),
      );
    }
  }

  private route(e: KubeRequest): [number, unknown] {
    // Authentication comes before routing, as on the real server.
    const token = e.authorization?.startsWith('Bearer ') ? e.authorization.slice(7) : undefined;
    if (token === undefined || !this.tokens.has(token)) throw new StatusError(unauthorized());
    const parts = e.path.split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] !== 'api' || parts[1] !== 'v1') throw routeNotFound();
    const rest = parts.slice(2);
    const dryRun = e.query.dryRun === 'All';
    if (rest[0] === 'pods' && rest.length === 1) return this.list(e, undefined);
    if (rest[0] === 'namespaces' && rest.length === 1 && e.method === 'GET') {
      return [200, { kind: 'NamespaceList', apiVersion: 'v1', metadata: { resourceVersion: this.store.resourceVersion() }, items: [...this.store.namespaces].sort().map(namespaceObject) }];
    }
    if (rest[0] === 'namespaces' && rest.length === 2 && e.method === 'GET') {
      if (!this.store.namespaces.has(rest[1]!)) throw new StatusError(status(404, 'NotFound', `namespaces "${rest[1]}" not found`, { name: rest[1]!, kind: 'namespaces' }));
      return [200, { apiVersion: 'v1', kind: 'Namespace', ...namespaceObject(rest[1]!) }];
    }
    if (rest[0] !== 'namespaces' || rest[2] !== 'pods' || rest.length > 4) throw routeNotFound();
    const ns = rest[1]!;
    const name = rest[3];
    if (name === undefined) {
      if (e.method === 'GET') return this.list(e, ns);
      if (e.method === 'POST') {
        this.authorize(e, 'create', ns);
        return [201, this.store.create(ns, parseJson(e.body), dryRun)];
      }
    } else {
      if (e.method === 'GET') {
        this.authorize(e, 'get', ns, name);
        const pod = this.store.get(ns, name);
        if (!pod) throw new StatusError(status(404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' }));
        return [200, pod];
      }
      if (e.method === 'DELETE') {
        this.authorize(e, 'delete', ns, name);
        const opts = e.body ? (parseJson(e.body) as { gracePeriodSeconds?: number; dryRun?: string[] }) : {};
        const q = e.query.gracePeriodSeconds;
        const grace = q !== undefined ? Number(q) : opts.gracePeriodSeconds;
        return [200, this.store.delete(ns, name, grace, dryRun || (opts.dryRun ?? []).includes('All'))];
      }
    }
    throw new StatusError(status(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`));
  }

  private list(e: KubeRequest, ns: string | undefined): [number, unknown] {
    if (e.method !== 'GET') throw new StatusError(status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
    const watch = e.query.watch === 'true' || e.query.watch === '1';
    this.authorize(e, watch ? 'watch' : 'list', ns);
    if (watch) throw new StatusError(status(501, 'NotImplemented', 'the fake apiserver does not implement watch'));
    const q = { labelSelector: e.query.labelSelector, fieldSelector: e.query.fieldSelector, limit: e.query.limit, continue: e.query.continue };
    return [200, listPods(this.store.list(ns), q, this.store.resourceVersion(), this.continueEpoch)];
  }
}

function namespaceObject(name: string): Record<string, unknown> {
  return { metadata: { name, labels: { 'kubernetes.io/metadata.name': name } }, spec: { finalizers: ['kubernetes'] }, status: { phase: 'Active' } };
}

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    throw badRequest('the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf');
  }
}

function defaultReason(code: number): string {
  const reasons: Record<number, string> = { 400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 409: 'Conflict', 410: 'Expired', 422: 'Invalid', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout' };
  return reasons[code] ?? 'Unknown';
}

export type { KubeStatus };

/** Starts a fake apiserver on an ephemeral port. Close it with `close()` in afterEach/afterAll. */
export async function startFakeKubeApiserver(options: FakeKubeOptions = {}): Promise<FakeKubeApiserver> {
  return new FakeKubeApiserver(options).start();
}
