/**
 * The gcp side of the proxy lifecycle: a proxy instance is a Compute Engine VM named after the instance
 * in zone `placement` (or the configured zone), carrying MANAGED_LABELS plus the fleet and proxy labels;
 * an instance without them is never read as ours, listed, or deleted. Inserts, starts, resumes and
 * deletes await their zone operation; an insert operation that ends with an error (quota, an exhausted
 * zone) is a ProvisioningError with the API's message. An existing instance that was stopped or
 * preempted (TERMINATED) is started, a suspended one resumed; one still stopping or suspending is
 * looked at again later. With a firewall configured, the provider's rule is ensured once before the
 * first insert (firewall.ts) and every instance carries its network tag. The provider's egress policy
 * document is the metadata item `egress-proxy-policy`: set at insert, and on an existing instance
 * brought up to date with setMetadata (under the metadata fingerprint) before anything else, so a
 * stopped instance boots with the current one; an unchanged policy writes nothing. Every request is
 * cancelled when the caller's signal ends (lifecycle-calls.ts). Error mapping: lifecycle-errors.ts. */
import { proxyEgressPolicy, type ProxyEgressPolicy } from '../../egress/policy-config.ts';
import type { Logger } from '../../logging.ts';
import { ForeignInstanceError, foreignOwner, ProvisioningError, type Instance, type InstanceSpec, type ProxyLifecycle } from '../lifecycle.ts';
import { DEFAULT_MAX_PAGES } from '../../clients/page-bound.ts';
import type { ComputeClients } from './clients.ts';
import { httpStatus } from './classify.ts';
import { createFirewallEnsurer, proxyNetworkTag, type FirewallEnsurer } from './firewall.ts';
import { gaxCall, type Operation } from './lifecycle-calls.ts';
import { instanceCalls } from './instance-calls.ts';
import { GcpRequestError, mapComputeError } from './lifecycle-errors.ts';
import { failedOperation } from './operations.ts';
import {
  FLEET_LABEL,
  PROXY_LABEL,
  instanceResource,
  isManaged,
  policyUpdate,
  stopReason,
  toInstance,
  type BootItems,
  type ComputeInstance,
  type InstanceSettings,
} from './lifecycle-instance.ts';
import { renderUserData } from '../boot/cloud-init.ts';
import { GCE_STARTUP_SCRIPT } from '../boot/gce-startup-script.ts';
import { bootPrograms } from '../boot/programs.ts';

export { GcpAccessError, GcpRequestError } from './lifecycle-errors.ts';
export {
  FLEET_LABEL,
  PROXY_LABEL,
  METADATA_USER,
  METADATA_PASSWORD,
  METADATA_PORT,
  METADATA_POLICY,
  METADATA_USER_DATA,
  METADATA_STARTUP_SCRIPT,
  fleetFilter,
} from './lifecycle-instance.ts';
export { firewallRuleName, proxyNetworkTag } from './firewall.ts';

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
  /** The provider's name: names the managed firewall rule and the proxies' network tag. */
  provider?: string;
  /**
   * A managed firewall rule (needs `provider`): TCP on `port` from `sourceRanges` to the proxies' network
   * tag, on `network` (default: the instances' network). Ensured once before the first insert.
   */
  firewall?: { sourceRanges: string[]; network?: string };
  logger: Logger;
  /** `maxResults` of each aggregated-list page (≤ 500, default 500). */
  pageSize?: number;
  /** Pages one listing may take before it fails (default DEFAULT_MAX_PAGES); a repeated `nextPageToken` fails at once. */
  maxPages?: number;
  /** Least time between two operation polls when `wait` answers before the operation is done (default 1000 ms). */
  operationPollMs?: number;
  /** The document every proxy receives (`proxyEgressPolicy` of the provider's config); default: the default deny alone. */
  egressPolicy?: ProxyEgressPolicy;
  /**
   * Whether an insert carries the cloud-init `user-data` (and `startup-script`) that installs and starts the
   * proxy on a stock Debian 12 image (docs/gcp-provider.md). Default false here; the provider's configuration
   * (`proxies.bootUserData`) defaults it to true.
   */
  bootUserData?: boolean;
}

export function createGcpLifecycle(options: GcpLifecycleOptions): ProxyLifecycle {
  const { clients, project } = options;
  if (Boolean(options.image) === Boolean(options.instanceTemplate)) {
    throw new TypeError('createGcpLifecycle: give exactly one of image and instanceTemplate');
  }
  const port = options.port ?? DEFAULT_PROXY_PORT;
  const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const maxPages = options.maxPages ?? DEFAULT_MAX_PAGES;
  const pollMs = options.operationPollMs ?? 1000;
  const log = options.logger.child({ component: 'gcp-lifecycle', project });
  if (options.firewall && !options.provider) throw new TypeError('createGcpLifecycle: a firewall needs the provider name');
  const firewallTag = options.firewall && options.provider ? proxyNetworkTag(options.provider) : undefined;
  const network = options.network ?? 'global/networks/default';
  const firewall: FirewallEnsurer | undefined =
    options.firewall && options.provider
      ? createFirewallEnsurer({
          clients,
          project,
          settings: { provider: options.provider, sourceRanges: options.firewall.sourceRanges, network: options.firewall.network ?? network, port },
          logger: log,
          operationPollMs: pollMs,
        })
      : undefined;
  const calls = instanceCalls({ clients, project, pollMs, pageSize, maxPages, logger: log });
  const zoneOf = (placement: string | undefined): string => placement ?? options.zone;
  // Serialised once: an unchanged policy is the same text on every ensure, so it never rewrites metadata.
  const policy = JSON.stringify(options.egressPolicy ?? proxyEgressPolicy(undefined, undefined));
  const settings = (zone: string): InstanceSettings => ({
    zone,
    machineType: options.machineType ?? (options.instanceTemplate ? undefined : DEFAULT_MACHINE_TYPE),
    image: options.image,
    instanceTemplate: options.instanceTemplate,
    port,
    network,
    networkTags: options.networkTags ?? [],
    firewallTag,
    policy,
  });

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

  /** The user-data for one proxy: its credentials and port; the policy stays the metadata item (followed on the VM). */
  async function bootItems(spec: InstanceSpec): Promise<BootItems | undefined> {
    if (!options.bootUserData) return undefined;
    const userData = renderUserData({ credentials: spec.credentials, port, policy: { kind: 'gce-metadata' }, programs: await bootPrograms() });
    return { userData, startupScript: GCE_STARTUP_SCRIPT };
  }

  async function insert(spec: InstanceSpec, zone: string, signal: AbortSignal): Promise<Instance> {
    const what = `creating instance "${spec.name}" in zone "${zone}"`;
    const request = {
      project,
      zone,
      instanceResource: instanceResource(spec, settings(zone), await bootItems(spec)),
      ...(options.instanceTemplate ? { sourceInstanceTemplate: options.instanceTemplate } : {}),
    };
    let op: Operation;
    try {
      ({ response: op } = await gaxCall<Operation>(clients.instances, 'insert', request, { project, zone }, signal));
    } catch (err) {
      // A concurrent ensure inserted it between our read and our insert: continue from what it made.
      if (!signal.aborted && httpStatus(err) === 409) {
        const raced = await calls.read(spec.name, zone, signal);
        if (raced) return adopt(raced, spec, zone);
      }
      throw mapComputeError(err, what, signal, true);
    }
    log.info({ instance: spec.name, zone, proxy: spec.owner.proxy, operation: op.name }, 'proxy instance insert started');
    const failure = await calls.zoneOperationFailure(op, zone, signal, (err) =>
      mapComputeError(err, `waiting for the insert of instance "${spec.name}" in zone "${zone}"`, signal),
    );
    if (failure) {
      log.warn({ instance: spec.name, zone, code: failure.code }, 'proxy instance insert failed');
      throw new ProvisioningError(`${what}: ${failure.text}`);
    }
    const created = await calls.read(spec.name, zone, signal);
    if (!created) throw new GcpRequestError(`${what}: the insert finished but the instance is gone`, undefined, undefined);
    return adopt(created, spec, zone);
  }

  /**
   * Starts a stopped or preempted instance (`start`) or resumes a suspended one (`resume`), awaiting the
   * operation, then reads it again: its ephemeral external address is a new one. A failure here is
   * retryable whatever the API said (the instance exists; a zone out of capacity for a spot VM, a
   * resourceNotReady race), except for access errors.
   */
  async function restart(inst: ComputeInstance, spec: InstanceSpec, zone: string, action: 'start' | 'resume', signal: AbortSignal): Promise<Instance> {
    const name = spec.name;
    const what = `${action === 'start' ? 'starting' : 'resuming'} instance "${name}" in zone "${zone}"`;
    log.info(
      {
        instance: name,
        zone,
        proxy: spec.owner.proxy,
        status: String(inst.status),
        reason: stopReason(inst),
        lastStopTimestamp: inst.lastStopTimestamp ?? undefined,
      },
      action === 'start' ? 'proxy instance is not running; starting it' : 'proxy instance is suspended; resuming it',
    );
    const retryable = (err: unknown): unknown => {
      const mapped = mapComputeError(err, what, signal);
      return mapped instanceof ProvisioningError ? new GcpRequestError(mapped.message, httpStatus(err), undefined, { cause: mapped.cause }) : mapped;
    };
    const op = await calls.startOperation(action, zone, name, {}, signal).catch((err: unknown) => {
      throw retryable(err);
    });
    const failure = await calls.zoneOperationFailure(op, zone, signal, retryable);
    if (failure) {
      log.warn({ instance: name, zone, code: failure.code }, `proxy instance ${action} failed`);
      throw failedOperation(what, failure);
    }
    const fresh = await calls.read(name, zone, signal);
    if (!fresh) throw new GcpRequestError(`${what}: the instance is gone`, undefined, undefined);
    const instance = adopt(fresh, spec, zone);
    log.info(
      { instance: name, zone, proxy: spec.owner.proxy, status: String(fresh.status), endpoint: instance.endpoint?.host },
      `proxy instance ${action === 'start' ? 'started' : 'resumed'}`,
    );
    return instance;
  }

  /**
   * Brings the instance's `egress-proxy-policy` item up to date (an instance of ours, checked by the
   * caller). The read fingerprint is the precondition: a 412 (someone changed the metadata meanwhile)
   * is retryable, and the next ensure reads again. The guest applies the new value by watching its
   * metadata (docs/gcp-provider.md#egress-policy); the instance is neither restarted nor replaced.
   */
  async function updatePolicy(inst: ComputeInstance, spec: InstanceSpec, zone: string, signal: AbortSignal): Promise<void> {
    const update = policyUpdate(inst, policy);
    if (!update) return;
    const name = spec.name;
    const what = `updating the egress policy of instance "${name}" in zone "${zone}"`;
    const mapError = (err: unknown): unknown => mapComputeError(err, what, signal);
    const op = await calls.startOperation('setMetadata', zone, name, { metadataResource: update }, signal).catch((err: unknown) => {
      throw mapError(err);
    });
    const failure = await calls.zoneOperationFailure(op, zone, signal, mapError);
    if (failure) throw failedOperation(what, failure);
    log.info({ instance: name, zone, proxy: spec.owner.proxy }, 'proxy egress policy changed: instance metadata updated');
  }

  /** An existing instance of ours, brought back when it was stopped, preempted or suspended. */
  async function revive(inst: ComputeInstance, spec: InstanceSpec, zone: string, signal: AbortSignal): Promise<Instance> {
    const current = adopt(inst, spec, zone);
    const status = String(inst.status);
    if (status === 'TERMINATED' || status === 'STOPPED') return restart(inst, spec, zone, 'start', signal);
    if (status === 'SUSPENDED') return restart(inst, spec, zone, 'resume', signal);
    if (status === 'STOPPING' || status === 'SUSPENDING') {
      log.info({ instance: spec.name, zone, proxy: spec.owner.proxy, status }, 'proxy instance is stopping; it is brought back once it has stopped');
      return { ...current, state: 'provisioning', message: `instance is ${status}; it is started again once it has stopped` };
    }
    return current;
  }

  return {
    async ensureInstance(spec, signal) {
      const zone = zoneOf(spec.placement);
      const existing = await calls.read(spec.name, zone, signal);
      if (existing) {
        adopt(existing, spec, zone); // refuses an instance that is not this proxy's before writing to it
        await updatePolicy(existing, spec, zone, signal);
        return revive(existing, spec, zone, signal);
      }
      await firewall?.ensure(signal);
      return insert(spec, zone, signal);
    },

    async getInstance(name, placement, signal) {
      const inst = await calls.read(name, zoneOf(placement), signal);
      return inst && isManaged(inst) ? toInstance(inst, port) : undefined;
    },

    async deleteInstance(name, placement, { owner }, signal) {
      const zone = zoneOf(placement);
      const inst = await calls.read(name, zone, signal);
      if (!inst) return;
      const labels = inst.labels ?? {};
      const foreign = isManaged(inst) ? foreignOwner({ fleet: labels[FLEET_LABEL], proxy: labels[PROXY_LABEL] }, owner) : foreignOwner(undefined, owner);
      if (foreign) {
        log.warn({ instance: name, zone, reason: foreign }, 'instance is not ours; not deleting it');
        throw new ForeignInstanceError(name, `instance in zone "${zone}": ${foreign}`);
      }
      const what = `deleting instance "${name}" in zone "${zone}"`;
      let op: Operation;
      try {
        op = await calls.startOperation('delete', zone, name, {}, signal);
      } catch (err) {
        if (!signal.aborted && httpStatus(err) === 404) return;
        throw mapComputeError(err, what, signal);
      }
      const failure = await calls.zoneOperationFailure(op, zone, signal, (err) =>
        mapComputeError(err, `waiting for the delete of instance "${name}" in zone "${zone}"`, signal),
      );
      if (failure) throw failedOperation(what, failure);
      log.info({ instance: name, zone }, 'proxy instance deleted');
    },

    async *listInstances(fleet, signal) {
      for await (const inst of calls.listFleet(fleet, signal)) yield toInstance(inst, port);
    },
  };
}
