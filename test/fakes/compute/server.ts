/**
 * A fake Compute Engine v1 REST server for tests: a real HTTP server on 127.0.0.1:0, driven by the real
 * @google-cloud/compute 6.15 (gax REST fallback, `$alt=json;enum-encoding=int`), stateful.
 *
 * Implemented (under /compute/v1/projects/{project}): aggregated/instances and zones/{z}/instances lists
 * with `filter` (see filter.ts), `maxResults` ≤ 500 and an opaque `nextPageToken` tied to the filter,
 * per-zone NO_RESULTS_ON_PAGE warnings, `returnPartialSuccess` + `unreachables` (knob
 * `state.unreachableZones`; 503 without partial success); instances get, insert (name and label checks,
 * 409 on duplicates, `requestId` idempotency), delete, stop, start, suspend, resume with the real status
 * transitions and 400 `resourceNotReady` in the wrong state (instance-actions.ts), setLabels (412
 * conditionNotMet on a stale `labelFingerprint`), setMetadata (replaces every item; 412 conditionNotMet on a
 * missing or stale metadata `fingerprint`; key pattern, duplicate keys and the 256 KB value / 512 KB total
 * limits, also checked on insert); every instance carries `metadata` with its fingerprint; preemption of a spot VM (`preemptInstance`); ephemeral
 * external addresses released on stop, preemption and suspend and newly assigned on start and resume;
 * global firewall rules get, list, insert, patch, delete with validation (firewalls.ts); zone and global
 * operations get and wait; operations that stay RUNNING for `operationPolls` polls; provisioning failures
 * as HTTP 200 + DONE + `error`; bearer-token or API-key authentication (401), 403 for other projects, a
 * "Compute API disabled" 403; one-shot faults (a latency before or after the change is applied); a
 * request log; optional TLS (`tls: true`). gcloud works against it too (gcloud.test.ts).
 *
 * Deviations from the real API:
 * - Only instances, firewall rules, and zone and global operations; no regions, disks, images,
 *   machine-type or subnetwork validation. Networks are names in `state.networks` (`default` only).
 * - Lists serve the current state on every page (the real pages come from a snapshot); aggregated lists
 *   cover zones only (no regional scopes) and page over instances in zone/name order.
 * - `wait` answers at once (one poll) instead of blocking up to 2 minutes; `orderBy` is ignored.
 *   Operations advance only when polled (or `state.finishAllOperations()`), not with time.
 * - Instances do not change state by themselves unless a test calls setInstanceStatus or
 *   preemptInstance. Every external address is ephemeral (no reserved static addresses); that suspend
 *   releases it as stop does has not been checked against the real API.
 * - Error messages for firewall validation and `resourceNotReady` follow the real shapes (reason, field
 *   named in the message) but their wording is approximate.
 * - Filter fields that do not exist match nothing (the real API may answer 400); URL fields also match
 *   on their last path segment (`zone = us-central1-a`).
 * - Enum fields are strings (`"RUNNING"`), as the real server sends them despite `enum-encoding=int`.
 */
import { delayUnlessClosed, sendJson, takeFault, watchClientAbort } from '../http-plumbing.ts';
import { misbehave, quotedRefusal, withStuckPageToken, type Misbehaviour } from '../misbehaviour.ts';
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { apiDisabled, ComputeHttpError, computeError, defaultFaultReason, unauthenticated } from './errors.ts';
import { route } from './routes.ts';
import { preempt } from './instance-actions.ts';
import { ComputeState, type FakeFirewall, type FakeInstance, type FakeOperation, type InstanceStatus, type OperationFailure } from './state.ts';
import { selfSignedCert, type SelfSignedCert } from '../kube-apiserver/tls.ts';
import type { ComputeFault, ComputeRequest } from './types.ts';

export type { ComputeFault, ComputeRequest };

export interface FakeComputeOptions {
  /** Serve HTTPS with a fresh self-signed certificate for 127.0.0.1 (see `tlsCert`). */
  tls?: boolean;
  project?: string;
  /** The project number shown in the "API disabled" message. */
  projectNumber?: string;
  zones?: string[];
  /** Accepted bearer tokens. Default `['fake-access-token']`. */
  tokens?: string[];
  /** Accepted API keys (`x-goog-api-key`). Default none. */
  apiKeys?: string[];
  /** Allocates each new ephemeral external address (default 34.0.0.N); e.g. loopback addresses a test can reach. */
  externalIps?: () => string;
}

export class FakeCompute extends EventEmitter {
  readonly requests: ComputeRequest[] = [];
  readonly project: string;
  readonly projectNumber: string;
  readonly tokens: Set<string>;
  readonly apiKeys: Set<string>;
  state!: ComputeState;
  private readonly zones: string[];
  private readonly externalIps: (() => string) | undefined;
  private readonly faults: ComputeFault[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private apiEnabled = true;
  private server!: Server;
  port = 0;
  url = '';

  /** The server certificate (PEM, also the CA that trusts it) when started with `tls: true`. */
  readonly tlsCert: SelfSignedCert | undefined;

  constructor(options: FakeComputeOptions = {}) {
    super();
    this.tlsCert = options.tls ? selfSignedCert() : undefined;
    this.project = options.project ?? 'egress-test';
    this.projectNumber = options.projectNumber ?? '123456789012';
    this.zones = options.zones ?? ['europe-west1-b', 'us-central1-a', 'us-central1-b'];
    this.tokens = new Set(options.tokens ?? ['fake-access-token']);
    this.apiKeys = new Set(options.apiKeys ?? []);
    this.externalIps = options.externalIps;
  }

  async start(): Promise<this> {
    const handler = (req: IncomingMessage, res: ServerResponse): void => void this.handle(req, res);
    this.server = this.tlsCert ? createTlsServer({ key: this.tlsCert.key, cert: this.tlsCert.cert }, handler) : createServer(handler);
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.port = (this.server.address() as AddressInfo).port;
    this.url = `${this.tlsCert ? 'https' : 'http'}://127.0.0.1:${this.port}`;
    this.state = new ComputeState(this.project, this.zones, this.url, this.externalIps);
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

  /** Endpoint options for `new InstancesClient({...})` (add an auth client). */
  clientOptions(): { apiEndpoint: string; port: number; protocol: 'http' | 'https' } {
    return { apiEndpoint: '127.0.0.1', port: this.port, protocol: this.tlsCert ? 'https' : 'http' };
  }

  /** Knob: every call answers 403 accessNotConfigured ("Compute Engine API has not been used …"). */
  disableApi(): void {
    this.apiEnabled = false;
  }

  enableApi(): void {
    this.apiEnabled = true;
  }

  /** Standing misbehaviour for the hostile-peer suite (../misbehaviour.ts); `{}` turns it off. */
  misbehaviour: Misbehaviour = {};

  injectFault(fault: ComputeFault): void {
    this.faults.push(fault);
  }

  /** Knob: polls an operation stays RUNNING before DONE (default 0: the first poll completes it). */
  setOperationPolls(n: number): void {
    this.state.operationPolls = n;
  }

  /** Knob: the next operation completes as HTTP 200 + DONE + error (e.g. QUOTA_EXCEEDED). */
  failNextOperation(f: OperationFailure): void {
    this.state.failNextOperation(f);
  }

  nextRequest(): Promise<ComputeRequest> {
    return once(this, 'request').then(([r]) => r as ComputeRequest);
  }

  nextClientAbort(): Promise<ComputeRequest> {
    return once(this, 'client-abort').then(([r]) => r as ComputeRequest);
  }

  // Direct state access.
  seedInstance(zone: string, instance: { name: string; labels?: Record<string, string>; status?: InstanceStatus; [k: string]: unknown }): FakeInstance {
    if (!this.zones.includes(zone)) throw new Error(`unknown zone ${zone}`);
    const { status, ...body } = instance;
    const inst = this.state.build(zone, body, status ?? 'RUNNING');
    // A seeded instance may be old (GC tests); an inserted one is always made now.
    if (typeof body.creationTimestamp === 'string') inst.creationTimestamp = body.creationTimestamp;
    if (typeof body.labelFingerprint === 'string') inst.labelFingerprint = body.labelFingerprint;
    this.state.instances.set(this.state.key(zone, inst.name), inst);
    return structuredClone(inst);
  }

  getInstance(zone: string, name: string): FakeInstance | undefined {
    const i = this.state.instances.get(this.state.key(zone, name));
    return i ? structuredClone(i) : undefined;
  }

  listInstances(zone?: string): FakeInstance[] {
    return this.state.list(zone).map((i) => structuredClone(i));
  }

  setInstanceStatus(zone: string, name: string, status: InstanceStatus): void {
    const i = this.state.instances.get(this.state.key(zone, name));
    if (!i) throw new Error(`no instance ${zone}/${name}`);
    i.status = status;
  }

  /**
   * Preempts the instance as Compute preempts a spot VM: TERMINATED, its ephemeral external address
   * released, a DONE `compute.instances.preempted` operation recorded. A `start` assigns a new address.
   */
  preemptInstance(zone: string, name: string): FakeOperation {
    return preempt(this.state, zone, name);
  }

  getFirewall(name: string): FakeFirewall | undefined {
    const f = this.state.firewalls.get(name);
    return f ? structuredClone(f) : undefined;
  }

  listFirewalls(): FakeFirewall[] {
    return [...this.state.firewalls.values()].map((f) => structuredClone(f));
  }

  /** Stores a rule directly (as if made by hand), completed at once. */
  seedFirewall(rule: Partial<FakeFirewall> & { name: string }): FakeFirewall {
    const fw: FakeFirewall = {
      kind: 'compute#firewall',
      id: String(Date.now()),
      network: `${this.state.globalUrl()}/networks/default`,
      priority: 1000,
      direction: 'INGRESS',
      disabled: false,
      logConfig: { enable: false },
      creationTimestamp: new Date().toISOString(),
      selfLink: `${this.state.globalUrl()}/firewalls/${rule.name}`,
      ...rule,
    };
    this.state.firewalls.set(fw.name, fw);
    return structuredClone(fw);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', 'http://fake');
    const header = (n: string): string | undefined => {
      const v = req.headers[n];
      return Array.isArray(v) ? v.join(', ') : v;
    };
    const entry: ComputeRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      rawQuery: url.search.replace(/^\?/, ''),
      contentType: header('content-type'),
      authorization: header('authorization'),
      apiKey: header('x-goog-api-key'),
      apiClient: header('x-goog-api-client'),
      requestParams: header('x-goog-request-params'),
      body: Buffer.concat(chunks).toString('utf8'),
      outcome: 'pending',
    };
    this.requests.push(entry);
    this.emit('request', entry);
    watchClientAbort(entry, res, () => this.emit('client-abort', entry));
    const fault = takeFault(this.faults, entry);
    if (fault?.latencyMs && fault.afterApply) {
      // The change is made, only the answer is held (a server that committed, then a lost response).
      let answer: [number, unknown];
      try {
        this.authenticate(entry);
        answer = route(this.state, entry, this.project);
      } catch (e) {
        answer = e instanceof ComputeHttpError ? [e.code, e.body] : [500, computeError(500, 'backendError', `Internal error: ${String(e)}`).body];
      }
      await delayUnlessClosed(fault.latencyMs, res, this.timers);
      if (entry.outcome === 'pending') this.send(res, entry, answer[0], answer[1]);
      return;
    }
    if (fault?.latencyMs) {
      await delayUnlessClosed(fault.latencyMs, res, this.timers);
      if (entry.outcome !== 'pending') return;
    }
    if (fault?.destroySocket) {
      entry.outcome = 'destroyed';
      req.socket.destroy();
      return;
    }
    if (misbehave(this.misbehaviour, entry, res)) return;
    try {
      if (fault?.status) {
        throw computeError(fault.status, fault.reason ?? defaultFaultReason(fault.status), fault.message ?? `fault injected: ${fault.status}`);
      }
      const quoted = quotedRefusal(this.misbehaviour, entry);
      if (quoted) throw computeError(quoted.status, quoted.reason, quoted.message);
      this.authenticate(entry);
      if (!this.apiEnabled) throw apiDisabled(this.projectNumber);
      const [code, body] = route(this.state, entry, this.project);
      this.send(res, entry, code, entry.method === 'GET' ? withStuckPageToken(this.misbehaviour, body, 'nextPageToken') : body);
    } catch (e) {
      if (e instanceof ComputeHttpError) this.send(res, entry, e.code, e.body);
      else this.send(res, entry, 500, computeError(500, 'backendError', `Internal error: ${String(e)}`).body);
    }
  }

  private authenticate(e: ComputeRequest): void {
    if (e.apiKey !== undefined) {
      if (this.apiKeys.has(e.apiKey)) return;
      throw computeError(400, 'badRequest', 'API key not valid. Please pass a valid API key.', { status: 'INVALID_ARGUMENT' });
    }
    if (!e.authorization) throw unauthenticated(true);
    const token = e.authorization.startsWith('Bearer ') ? e.authorization.slice(7) : undefined;
    if (token === undefined || !this.tokens.has(token)) throw unauthenticated(false);
  }

  private send(res: ServerResponse, entry: ComputeRequest, code: number, body: unknown): void {
    sendJson(res, entry, code, body, 'application/json; charset=UTF-8');
  }
}

/** Starts a fake Compute API on an ephemeral port. Close it with `close()` in afterEach/afterAll. */
export async function startFakeCompute(options: FakeComputeOptions = {}): Promise<FakeCompute> {
  return new FakeCompute(options).start();
}
