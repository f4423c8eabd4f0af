/**
 * The gcp lifecycle's calls on Compute Engine instances, each cancelled when the caller's signal
 * ends (lifecycle-calls.ts) and its failure worded by lifecycle-errors.ts: reading one instance,
 * starting an operation on one and waiting for its zone operation, and listing a fleet's instances
 * page by page across zones.
 */
import type { protos } from '@google-cloud/compute';
import type { Logger } from '../../logging.ts';
import { PageBound } from '../../clients/page-bound.ts';
import { httpStatus } from './classify.ts';
import type { ComputeClients } from './clients.ts';
import { gaxCall, type Operation } from './lifecycle-calls.ts';
import { GcpRequestError, mapComputeError } from './lifecycle-errors.ts';
import { FLEET_LABEL, fleetFilter, isManaged, type ComputeInstance } from './lifecycle-instance.ts';
import { operationFailure, type OperationFailure } from './operations.ts';

type ScopedList = protos.google.cloud.compute.v1.IInstancesScopedList;

export interface InstanceCallsOptions {
  clients: ComputeClients;
  project: string;
  /** Least time between two operation polls when `wait` answers before the operation is done. */
  pollMs: number;
  /** `maxResults` of each aggregated-list page. */
  pageSize: number;
  /** Pages one listing may take before it fails. */
  maxPages: number;
  logger: Logger;
}

export interface InstanceCalls {
  /** The instance, or undefined when there is none (404). */
  read(name: string, zone: string, signal: AbortSignal): Promise<ComputeInstance | undefined>;
  /** Calls `method` of the instances API on `instance` (routed by it), which answers a zone operation. */
  startOperation(method: string, zone: string, instance: string, extra: object, signal: AbortSignal): Promise<Operation>;
  /** Polls the zone operation until DONE: how it failed, or undefined. A failed wait throws `mapWaitError(err)`. */
  zoneOperationFailure(op: Operation, zone: string, signal: AbortSignal, mapWaitError: (err: unknown) => unknown): Promise<OperationFailure | undefined>;
  /**
   * The fleet's instances carrying our labels, every zone; after yielding them, a GcpRequestError
   * (`unreachable`) when some zone could not be listed (the inventory is incomplete).
   */
  listFleet(fleet: string, signal: AbortSignal): AsyncGenerator<ComputeInstance>;
}

export function instanceCalls(options: InstanceCallsOptions): InstanceCalls {
  const { clients, project, pollMs, pageSize, maxPages } = options;
  const log = options.logger;

  /** The instance, or undefined when there is none (404). */
  async function read(name: string, zone: string, signal: AbortSignal): Promise<ComputeInstance | undefined> {
    try {
      const { response } = await gaxCall<ComputeInstance>(
        clients.instances,
        'get',
        { project, zone, instance: name },
        { project, zone, instance: name },
        signal,
      );
      return response;
    } catch (err) {
      if (!signal.aborted && httpStatus(err) === 404) return undefined;
      throw mapComputeError(err, `reading instance "${name}" in zone "${zone}"`, signal);
    }
  }

  /** Calls `method` of the instances API on `instance` (routed by it), which answers a zone operation. */
  async function startOperation(method: string, zone: string, instance: string, extra: object, signal: AbortSignal): Promise<Operation> {
    const routing = { project, zone, instance };
    return (await gaxCall<Operation>(clients.instances, method, { ...routing, ...extra }, routing, signal)).response;
  }

  /** Polls the zone operation until DONE (`wait` blocks up to ~2 minutes per call on the real API): how it failed, or undefined. */
  function zoneOperationFailure(
    op: Operation,
    zone: string,
    signal: AbortSignal,
    mapWaitError: (err: unknown) => unknown,
  ): Promise<OperationFailure | undefined> {
    const wait = async (operation: string, s: AbortSignal): Promise<Operation> =>
      (await gaxCall<Operation>(clients.zoneOperations, 'wait', { project, zone, operation }, { project, zone, operation }, s)).response;
    return operationFailure(op, wait, pollMs, signal, mapWaitError);
  }

  async function* listFleet(fleet: string, signal: AbortSignal): AsyncGenerator<ComputeInstance> {
    const filter = fleetFilter(fleet);
    // Zones a page could not reach: their instances are missing from this inventory, so after
    // yielding the rest the listing fails (the sweep deletes nothing from an incomplete inventory).
    const unreachable = new Set<string>();
    const bound = new PageBound('listing proxy instances', maxPages);
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
      if (raw?.unreachables?.length) {
        log.warn({ unreachables: raw.unreachables }, 'some zones could not be listed; their instances are left out');
        for (const zone of raw.unreachables) unreachable.add(zone);
      }
      for (const scoped of Object.values(items)) {
        for (const inst of scoped.instances ?? []) {
          // The server filtered already; checking again costs nothing and guards the "never touch" rule.
          if (isManaged(inst) && inst.labels?.[FLEET_LABEL] === fleet) yield inst;
        }
      }
      pageToken = bound.next(raw?.nextPageToken);
    } while (pageToken);
    if (unreachable.size > 0) {
      throw new GcpRequestError(
        `listing proxy instances: ${[...unreachable].sort().join(', ')} could not be listed (the inventory is incomplete)`,
        undefined,
        'unreachable',
      );
    }
  }

  return { read, startOperation, zoneOperationFailure, listFleet };
}
