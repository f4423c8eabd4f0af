/**
 * The fake Compute project's state: zonal instances, global firewall rules, and zone and global
 * operations. Operations stay RUNNING for `operationPolls` polls (get or wait) and then complete,
 * applying their effect (the instance becomes RUNNING, TERMINATED, SUSPENDED or disappears; a firewall
 * rule appears, changes or disappears), or fail as HTTP 200 + DONE + `error` when a failure was queued.
 * External addresses are ephemeral: released when an instance stops, is preempted or suspends, and a
 * new one is assigned when it starts or resumes.
 */
import { randomBytes } from 'node:crypto';

export const INSTANCE_STATUSES = ['PROVISIONING', 'STAGING', 'RUNNING', 'STOPPING', 'STOPPED', 'SUSPENDING', 'SUSPENDED', 'REPAIRING', 'TERMINATED'] as const;
export type InstanceStatus = (typeof INSTANCE_STATUSES)[number];

export interface FakeInstance {
  kind: 'compute#instance';
  id: string;
  name: string;
  zone: string;
  machineType: string;
  status: InstanceStatus;
  labels?: Record<string, string>;
  labelFingerprint: string;
  /** Always present, as the real API answers it: a fingerprint, and the items when there are any. */
  metadata: FakeMetadata;
  networkInterfaces: { name: string; network: string; networkIP: string; accessConfigs?: { name: string; type: string; natIP?: string; kind: string }[] }[];
  creationTimestamp: string;
  selfLink: string;
  [k: string]: unknown;
}

export interface FakeMetadata {
  kind: 'compute#metadata';
  fingerprint: string;
  items?: { key: string; value: string }[];
}

/** Metadata as stored: items copied (none → no `items` field) under a new fingerprint. */
export function fakeMetadata(items: { key: string; value: string }[] | undefined): FakeMetadata {
  return {
    kind: 'compute#metadata',
    fingerprint: randomBytes(8).toString('base64'),
    ...(items?.length ? { items: items.map((i) => ({ key: i.key, value: i.value })) } : {}),
  };
}

export interface FakeFirewall {
  kind: 'compute#firewall';
  id: string;
  name: string;
  description?: string;
  network: string;
  priority: number;
  direction: 'INGRESS' | 'EGRESS';
  sourceRanges?: string[];
  targetTags?: string[];
  allowed?: { IPProtocol: string; ports?: string[] }[];
  denied?: { IPProtocol: string; ports?: string[] }[];
  disabled: boolean;
  logConfig: { enable: boolean };
  creationTimestamp: string;
  selfLink: string;
  [k: string]: unknown;
}

/** What an operation points at. */
export interface OperationTarget {
  id: string;
  selfLink: string;
}

export interface FakeOperation {
  kind: 'compute#operation';
  id: string;
  name: string;
  operationType: string;
  status: 'PENDING' | 'RUNNING' | 'DONE';
  progress: number;
  /** Zone operations only; global ones have none. */
  zone?: string;
  targetLink: string;
  targetId: string;
  user: string;
  insertTime: string;
  startTime: string;
  endTime?: string;
  selfLink: string;
  error?: { errors: { code: string; message: string }[] };
  httpErrorStatusCode?: number;
  httpErrorMessage?: string;
}

export interface OperationFailure {
  code: string;
  message?: string;
  /** HTTP status the operation reports (`httpErrorStatusCode`); default 403 for quota, 503 otherwise. */
  httpStatus?: number;
}

interface OpRecord {
  op: FakeOperation;
  pollsLeft: number;
  complete: () => void;
  onFail?: () => void;
  fail?: OperationFailure;
}

/** Compute's timestamp format: RFC 3339 with milliseconds and an offset. */
export const computeTime = (d = new Date()): string => d.toISOString().replace('Z', '-00:00');

let idCounter = 4_000_000_000_000_000_000n;
export const nextId = (): string => String((idCounter += 7919n));

/** Where zone operations are keyed by `<zone>/<name>`, global ones by `global/<name>`. */
const GLOBAL = 'global';

export class ComputeState {
  readonly instances = new Map<string, FakeInstance>();
  readonly firewalls = new Map<string, FakeFirewall>();
  /** Networks that exist (by name); a firewall on another network is a 404. */
  readonly networks = new Set<string>(['default']);
  readonly operations = new Map<string, OpRecord>();
  private readonly failures: OperationFailure[] = [];
  private ipCounter = 2;
  private natCounter = 2;
  /** How many polls (get or wait) an operation reports RUNNING before it is DONE. */
  operationPolls = 0;
  /** Knob: zones an aggregated list cannot reach (left out and named in `unreachables` with partial success, 503 without). */
  readonly unreachableZones = new Set<string>();

  constructor(
    readonly project: string,
    readonly zones: string[],
    readonly base: string,
    /** Allocates an ephemeral external address (default 34.0.0.N). */
    private readonly allocateExternalIp: (() => string) | undefined = undefined,
  ) {}

  globalUrl(): string {
    return `${this.base}/compute/v1/projects/${this.project}/global`;
  }

  /** A new ephemeral external address. */
  externalIp(): string {
    return this.allocateExternalIp ? this.allocateExternalIp() : `34.0.0.${this.natCounter++}`;
  }

  /** Releases the instance's ephemeral external addresses (stop, preemption, suspend). */
  releaseExternalIps(inst: FakeInstance): void {
    for (const nic of inst.networkInterfaces) for (const ac of nic.accessConfigs ?? []) delete ac.natIP;
  }

  /** Gives every external access config without an address a new one (start, resume). */
  assignExternalIps(inst: FakeInstance): void {
    for (const nic of inst.networkInterfaces) for (const ac of nic.accessConfigs ?? []) ac.natIP ??= this.externalIp();
  }

  zoneUrl(zone: string): string {
    return `${this.base}/compute/v1/projects/${this.project}/zones/${zone}`;
  }

  key(zone: string, name: string): string {
    return `${zone}/${name}`;
  }

  /** Instances in zone order, then name order. */
  list(zone?: string): FakeInstance[] {
    return this.zones
      .filter((z) => zone === undefined || z === zone)
      .flatMap((z) =>
        [...this.instances.values()].filter((i) => i.zone.endsWith(`/zones/${z}`)).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
      );
  }

  /** Builds an instance the way insert does (status PROVISIONING), without storing it. */
  build(zone: string, body: Record<string, unknown>, status: InstanceStatus = 'PROVISIONING'): FakeInstance {
    const name = String(body.name);
    const mt = typeof body.machineType === 'string' ? body.machineType : `zones/${zone}/machineTypes/e2-micro`;
    const nics = Array.isArray(body.networkInterfaces) && body.networkInterfaces.length > 0 ? (body.networkInterfaces as Record<string, unknown>[]) : [{}];
    const inst: FakeInstance = {
      ...body,
      kind: 'compute#instance',
      id: nextId(),
      name,
      zone: this.zoneUrl(zone),
      machineType: mt.startsWith('http') ? mt : `${this.base}/compute/v1/projects/${this.project}/${mt}`,
      status,
      labelFingerprint: randomBytes(8).toString('base64'),
      metadata: fakeMetadata((body.metadata as { items?: { key: string; value: string }[] } | undefined)?.items),
      networkInterfaces: nics.map((n, i) => ({
        ...n,
        name: `nic${i}`,
        network: typeof n.network === 'string' ? n.network : `${this.base}/compute/v1/projects/${this.project}/global/networks/default`,
        networkIP: `10.128.0.${this.ipCounter++}`,
        ...(Array.isArray(n.accessConfigs)
          ? {
              accessConfigs: (n.accessConfigs as Record<string, unknown>[]).map((a) => ({
                ...a,
                kind: 'compute#accessConfig',
                type: 'ONE_TO_ONE_NAT',
                name: typeof a.name === 'string' ? a.name : 'External NAT',
                natIP: this.externalIp(),
              })),
            }
          : {}),
      })),
      creationTimestamp: computeTime(),
      selfLink: `${this.zoneUrl(zone)}/instances/${name}`,
    };
    if (body.labels) inst.labels = { ...(body.labels as Record<string, string>) };
    return inst;
  }

  /** Queues a failure for the next operation that is created. */
  failNextOperation(f: OperationFailure): void {
    this.failures.push(f);
  }

  /** A zone operation (`zone`) or a global one (`zone` undefined) on `target`; `complete` applies its effect. */
  startOperation(zone: string | undefined, type: string, target: OperationTarget, complete: () => void, onFail?: () => void): FakeOperation {
    const now = Date.now();
    const name = `operation-${now}-${randomBytes(6).toString('hex')}`;
    const scopeUrl = zone === undefined ? this.globalUrl() : this.zoneUrl(zone);
    const op: FakeOperation = {
      kind: 'compute#operation',
      id: nextId(),
      name,
      operationType: type,
      status: 'RUNNING',
      progress: 0,
      ...(zone === undefined ? {} : { zone: this.zoneUrl(zone) }),
      targetLink: target.selfLink,
      targetId: target.id,
      user: 'egress@fake.iam.gserviceaccount.com',
      insertTime: computeTime(new Date(now)),
      startTime: computeTime(new Date(now)),
      selfLink: `${scopeUrl}/operations/${name}`,
    };
    const fail = this.failures.shift();
    this.operations.set(this.key(zone ?? GLOBAL, name), {
      op,
      pollsLeft: this.operationPolls,
      complete,
      ...(onFail ? { onFail } : {}),
      ...(fail ? { fail } : {}),
    });
    return structuredClone(op);
  }

  /** An operation that is already DONE (what the API records for a preemption, `compute.instances.preempted`). */
  recordDoneOperation(zone: string, type: string, target: OperationTarget): FakeOperation {
    const op = this.startOperation(zone, type, target, () => undefined);
    const rec = this.operations.get(this.key(zone, op.name));
    if (rec) {
      // A queued failure is for the next operation a client starts, not for this one.
      if (rec.fail) this.failures.unshift(rec.fail);
      delete rec.fail;
      this.finish(rec);
    }
    return structuredClone(rec?.op ?? op);
  }

  /** One poll (operations.get or wait) of a zone operation, or of a global one when `zone` is undefined. */
  poll(zone: string | undefined, name: string): FakeOperation | undefined {
    const rec = this.operations.get(this.key(zone ?? GLOBAL, name));
    if (!rec) return undefined;
    if (rec.op.status !== 'DONE') {
      if (rec.pollsLeft > 0) rec.pollsLeft -= 1;
      else this.finish(rec);
    }
    return structuredClone(rec.op);
  }

  /** Completes every pending operation at once (test access). */
  finishAllOperations(): void {
    for (const rec of this.operations.values()) if (rec.op.status !== 'DONE') this.finish(rec);
  }

  private finish(rec: OpRecord): void {
    rec.op.status = 'DONE';
    rec.op.progress = 100;
    rec.op.endTime = computeTime();
    if (rec.fail) {
      const f = rec.fail;
      const http = f.httpStatus ?? (f.code === 'QUOTA_EXCEEDED' ? 403 : 503);
      rec.op.error = { errors: [{ code: f.code, message: f.message ?? defaultFailureMessage(f.code) }] };
      rec.op.httpErrorStatusCode = http;
      rec.op.httpErrorMessage = http === 403 ? 'FORBIDDEN' : http === 503 ? 'SERVICE UNAVAILABLE' : 'ERROR';
      // A failed insert leaves no instance behind; a failed delete/stop leaves the instance as it was.
      if (rec.op.operationType === 'insert') {
        for (const [k, i] of this.instances) if (i.id === rec.op.targetId) this.instances.delete(k);
      }
      rec.onFail?.();
      return;
    }
    rec.complete();
  }
}

function defaultFailureMessage(code: string): string {
  if (code === 'QUOTA_EXCEEDED') return "Quota 'CPUS' exceeded.  Limit: 8.0 in region us-central1.";
  if (code === 'ZONE_RESOURCE_POOL_EXHAUSTED')
    return 'The zone does not have enough resources available to fulfill the request.  Try a different zone, or try again later.';
  return `operation failed: ${code}`;
}
