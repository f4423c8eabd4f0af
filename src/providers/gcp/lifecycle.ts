/**
 * The gcp side of the proxy lifecycle: a proxy instance is a Compute Engine VM named after the instance
 * in zone `placement` (or the configured zone), carrying MANAGED_LABELS plus the fleet and proxy labels;
 * an instance without them is never read as ours, listed, or deleted. Inserts and deletes await their
 * zone operation; an insert operation that ends with an error (quota, an exhausted zone) is a
 * ProvisioningError with the API's message. Every request is cancelled when the caller's signal ends
 * (lifecycle-calls.ts). Error mapping: lifecycle-errors.ts.
 */
import type { protos } from '@google-cloud/compute';
import type { Logger } from '../../logging.ts';
import { ProvisioningError, type Instance, type InstanceSpec, type ProxyLifecycle } from '../lifecycle.ts';
import type { ComputeClients } from './clients.ts';
import { httpStatus } from './classify.ts';
import { abortableDelay, gaxCall } from './lifecycle-calls.ts';
import { GcpRequestError, mapComputeError, operationErrorText } from './lifecycle-errors.ts';
import {
  FLEET_LABEL,
  PROXY_LABEL,
  fleetFilter,
  instanceResource,
  isManaged,
  toInstance,
  type ComputeInstance,
  type InstanceSettings,
} from './lifecycle-instance.ts';

export { GcpAccessError, GcpRequestError } from './lifecycle-errors.ts';
export { FLEET_LABEL, PROXY_LABEL, METADATA_USER, METADATA_PASSWORD, METADATA_PORT, fleetFilter } from './lifecycle-instance.ts';

type Operation = protos.google.cloud.compute.v1.IOperation;
type ScopedList = protos.google.cloud.compute.v1.IInstancesScopedList;

export const DEFAULT_MACHINE_TYPE = 'e2-micro';
export const DEFAULT_PROXY_PORT = 3128;
export const DEFAULT_PAGE_SIZE = 500;

export interface GcpLifecycleOptions {
  /** The provider's clients (`createComputeClients`); not closed by the lifecycle. */
  clients: ComputeClients;
  project: string;
  /** Zone for proxies whose spec has no placement. */
  zone: string;
  /** Machine type name (default e2-micro); with a template, leave it unset to use the template's. */
  machineType?: string;
  /** Boot disk image holding the forward proxy (`projects/p/global/images/family/f`). This or `instanceTemplate`. */
  image?: string;
  /** An instance template (`global/instanceTemplates/t` or a full URL). This or `image`. */
  instanceTemplate?: string;
  /** Port the forward proxy listens on (default 3128); passed to the image as metadata. */
  port?: number;
  /** Network of the NIC (default `global/networks/default`); ignored with a template. */
  network?: string;
  /** Network tags (for the firewall rule that opens the port); ignored with a template. */
  networkTags?: string[];
  logger: Logger;
  /** `maxResults` of each aggregated-list page (≤ 500, default 500). */
  pageSize?: number;
  /** Least time between two operation polls when `wait` answers before the operation is done (default 1000 ms). */
  operationPollMs?: number;
}

/** The client leaves numeric enums off, so `status` is the string the API sends; the number is for safety. */
const DONE = 2104194; // google.cloud.compute.v1.Operation.Status.DONE
const isDone = (op: Operation): boolean => String(op.status) === 'DONE' || Number(op.status) === DONE;

export function createGcpLifecycle(options: GcpLifecycleOptions): ProxyLifecycle {
  const { clients, project } = options;
  if (Boolean(options.image) === Boolean(options.instanceTemplate)) {
    throw new TypeError('createGcpLifecycle: give exactly one of image and instanceTemplate');
  }
  const port = options.port ?? DEFAULT_PROXY_PORT;
  const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const pollMs = options.operationPollMs ?? 1000;
  const log = options.logger.child({ component: 'gcp-lifecycle', project });
  const zoneOf = (placement: string | undefined): string => placement ?? options.zone;
  const settings = (zone: string): InstanceSettings => ({
    zone,
    machineType: options.machineType ?? (options.instanceTemplate ? undefined : DEFAULT_MACHINE_TYPE),
    image: options.image,
    instanceTemplate: options.instanceTemplate,
    port,
    network: options.network ?? 'global/networks/default',
    networkTags: options.networkTags ?? [],
  });

  /** The instance, or undefined when there is none (404). */
  async function read(name: string, zone: string, signal: AbortSignal): Promise<ComputeInstance | undefined> {
    try {
      const { response } = await gaxCall<ComputeInstance>(clients.instances, 'get', { project, zone, instance: name }, { project, zone, instance: name }, signal);
      return response;
    } catch (err) {
      if (!signal.aborted && httpStatus(err) === 404) return undefined;
      throw mapComputeError(err, `reading instance "${name}" in zone "${zone}"`, signal);
    }
  }

  /** Polls the zone operation until DONE (`wait` blocks up to ~2 minutes per call on the real API). */
  async function awaitOperation(op: Operation, zone: string, signal: AbortSignal): Promise<Operation> {
    let current = op;
    while (!isDone(current)) {
      const started = Date.now();
      const operation = current.name ?? '';
      ({ response: current } = await gaxCall<Operation>(clients.zoneOperations, 'wait', { project, zone, operation }, { project, zone, operation }, signal));
      if (!isDone(current)) await abortableDelay(pollMs - (Date.now() - started), signal);
    }
    return current;
  }

  function adopt(inst: ComputeInstance, spec: InstanceSpec, zone: string): Instance {
    const labels = inst.labels ?? {};
    if (!isManaged(inst)) {
      throw new ProvisioningError(`an instance named "${spec.name}" exists in zone "${zone}" without our labels; it is left alone`);
    }
    if (labels[FLEET_LABEL] !== spec.owner.fleet || labels[PROXY_LABEL] !== spec.owner.proxy) {
      throw new ProvisioningError(
        `instance "${spec.name}" in zone "${zone}" belongs to proxy "${labels[PROXY_LABEL]}" of fleet "${labels[FLEET_LABEL]}", not "${spec.owner.proxy}" of "${spec.owner.fleet}"`,
      );
    }
    return toInstance(inst, port);
  }

  async function insert(spec: InstanceSpec, zone: string, signal: AbortSignal): Promise<Instance> {
    const what = `creating instance "${spec.name}" in zone "${zone}"`;
    const request = {
      project,
      zone,
      instanceResource: instanceResource(spec, settings(zone)),
      ...(options.instanceTemplate ? { sourceInstanceTemplate: options.instanceTemplate } : {}),
    };
    let op: Operation;
    try {
      ({ response: op } = await gaxCall<Operation>(clients.instances, 'insert', request, { project, zone }, signal));
    } catch (err) {
      // A concurrent ensure inserted it between our read and our insert: continue from what it made.
      if (!signal.aborted && httpStatus(err) === 409) {
        const raced = await read(spec.name, zone, signal);
        if (raced) return adopt(raced, spec, zone);
      }
      throw mapComputeError(err, what, signal, true);
    }
    log.info({ instance: spec.name, zone, proxy: spec.owner.proxy, operation: op.name }, 'proxy instance insert started');
    let done: Operation;
    try {
      done = await awaitOperation(op, zone, signal);
    } catch (err) {
      throw mapComputeError(err, `waiting for the insert of instance "${spec.name}" in zone "${zone}"`, signal);
    }
    if (done.error) {
      const { code, text } = operationErrorText(done.error);
      log.warn({ instance: spec.name, zone, code }, 'proxy instance insert failed');
      throw new ProvisioningError(`${what}: ${text}`);
    }
    const created = await read(spec.name, zone, signal);
    if (!created) throw new GcpRequestError(`${what}: the insert finished but the instance is gone`, undefined, undefined);
    return adopt(created, spec, zone);
  }

  return {
    async ensureInstance(spec, signal) {
      const zone = zoneOf(spec.placement);
      const existing = await read(spec.name, zone, signal);
      if (existing) return adopt(existing, spec, zone);
      return insert(spec, zone, signal);
    },

    async getInstance(name, placement, signal) {
      const inst = await read(name, zoneOf(placement), signal);
      return inst && isManaged(inst) ? toInstance(inst, port) : undefined;
    },

    async deleteInstance(name, placement, signal) {
      const zone = zoneOf(placement);
      const inst = await read(name, zone, signal);
      if (!inst) return;
      if (!isManaged(inst)) {
        log.warn({ instance: name, zone }, 'instance has no labels of ours; not deleting it');
        return;
      }
      const what = `deleting instance "${name}" in zone "${zone}"`;
      let op: Operation;
      try {
        ({ response: op } = await gaxCall<Operation>(clients.instances, 'delete', { project, zone, instance: name }, { project, zone, instance: name }, signal));
      } catch (err) {
        if (!signal.aborted && httpStatus(err) === 404) return;
        throw mapComputeError(err, what, signal);
      }
      let done: Operation;
      try {
        done = await awaitOperation(op, zone, signal);
      } catch (err) {
        throw mapComputeError(err, `waiting for the delete of instance "${name}" in zone "${zone}"`, signal);
      }
      if (done.error) {
        const { code, text } = operationErrorText(done.error);
        throw new GcpRequestError(`${what}: ${text}`, done.httpErrorStatusCode ?? undefined, code);
      }
      log.info({ instance: name, zone }, 'proxy instance deleted');
    },

    async *listInstances(fleet, signal) {
      const filter = fleetFilter(fleet);
      let pageToken: string | undefined;
      do {
        let items: Record<string, ScopedList>;
        let raw: { nextPageToken?: string | null; unreachables?: string[] | null } | null;
        try {
          const page = await gaxCall<Record<string, ScopedList> | null>(
            clients.instances,
            'aggregatedList',
            { project, filter, maxResults: pageSize, returnPartialSuccess: true, ...(pageToken ? { pageToken } : {}) },
            { project },
            signal,
          );
          items = page.response ?? {};
          raw = page.raw as typeof raw;
        } catch (err) {
          throw mapComputeError(err, 'listing proxy instances', signal);
        }
        if (raw?.unreachables?.length) log.warn({ unreachables: raw.unreachables }, 'some zones could not be listed; their instances are left out');
        for (const scoped of Object.values(items)) {
          for (const inst of scoped.instances ?? []) {
            // The server filtered already; checking again costs nothing and guards the "never touch" rule.
            if (isManaged(inst) && inst.labels?.[FLEET_LABEL] === fleet) yield toInstance(inst, port);
          }
        }
        pageToken = raw?.nextPageToken || undefined;
      } while (pageToken);
    },
  };
}
