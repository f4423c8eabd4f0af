/**
 * The ensure path of the gcp lifecycle: an existing instance of this proxy has its egress policy
 * brought up to date and is brought back when it is not running (revive-instance.ts); otherwise the
 * firewall rule is ensured and the instance inserted, its zone operation awaited. An insert whose
 * operation ends with an error (quota, an exhausted zone) is a ProvisioningError with the API's message.
 */
import type { Logger } from '../../logging.ts';
import { ProvisioningError, type Instance, type InstanceSpec } from '../lifecycle.ts';
import { renderUserData } from '../boot/cloud-init.ts';
import { GCE_STARTUP_SCRIPT } from '../boot/gce-startup-script.ts';
import { bootPrograms } from '../boot/programs.ts';
import { httpStatus } from './classify.ts';
import type { ComputeClients } from './clients.ts';
import type { FirewallEnsurer } from './firewall.ts';
import type { InstanceCalls } from './instance-calls.ts';
import { gaxCall, type Operation } from './lifecycle-calls.ts';
import { GcpRequestError, mapComputeError } from './lifecycle-errors.ts';
import { adoptInstance, instanceResource, policyUpdate, type BootItems, type ComputeInstance, type InstanceSettings } from './lifecycle-instance.ts';
import { failedOperation } from './operations.ts';
import { reviveInstance } from './revive-instance.ts';

export interface InstanceEnsurerDeps {
  clients: ComputeClients;
  project: string;
  calls: InstanceCalls;
  log: Logger;
  /** Port the forward proxy listens on. */
  port: number;
  /** The egress policy document (policy-document.ts). */
  policy: string;
  /** What an insert into `zone` makes. */
  settings(zone: string): InstanceSettings;
  instanceTemplate: string | undefined;
  /** Whether an insert carries the cloud-init user-data and startup script that install the proxy. */
  bootUserData: boolean;
  /** Ensured once before the first insert, when configured. */
  firewall: FirewallEnsurer | undefined;
}

export type EnsureInstance = (spec: InstanceSpec, zone: string, signal: AbortSignal) => Promise<Instance>;

export function instanceEnsurer(deps: InstanceEnsurerDeps): EnsureInstance {
  const { clients, project, calls, log, port, policy } = deps;

  /** The user-data for one proxy: its credentials and port; the policy stays the metadata item (followed on the VM). */
  async function bootItems(spec: InstanceSpec): Promise<BootItems | undefined> {
    if (!deps.bootUserData) return undefined;
    const userData = renderUserData({ credentials: spec.credentials, port, policy: { kind: 'gce-metadata' }, programs: await bootPrograms() });
    return { userData, startupScript: GCE_STARTUP_SCRIPT };
  }

  async function insert(spec: InstanceSpec, zone: string, signal: AbortSignal): Promise<Instance> {
    const what = `creating instance "${spec.name}" in zone "${zone}"`;
    const request = {
      project,
      zone,
      instanceResource: instanceResource(spec, deps.settings(zone), await bootItems(spec)),
      ...(deps.instanceTemplate ? { sourceInstanceTemplate: deps.instanceTemplate } : {}),
    };
    let op: Operation;
    try {
      ({ response: op } = await gaxCall<Operation>(clients.instances, 'insert', request, { project, zone }, signal));
    } catch (err) {
      // A concurrent ensure inserted it between our read and our insert: continue from what it made.
      if (!signal.aborted && httpStatus(err) === 409) {
        const raced = await calls.read(spec.name, zone, signal);
        if (raced) return adoptInstance(raced, spec, zone, port);
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
    return adoptInstance(created, spec, zone, port);
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

  return async (spec, zone, signal) => {
    const existing = await calls.read(spec.name, zone, signal);
    if (existing) {
      adoptInstance(existing, spec, zone, port); // refuses an instance that is not this proxy's before writing to it
      await updatePolicy(existing, spec, zone, signal);
      return reviveInstance({ calls, log, port }, existing, spec, zone, signal);
    }
    await deps.firewall?.ensure(signal);
    return insert(spec, zone, signal);
  };
}
