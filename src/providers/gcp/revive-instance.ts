/**
 * An existing gcp proxy instance brought back by an ensure: a stopped or preempted one (TERMINATED,
 * STOPPED) is started, a suspended one resumed; one still stopping or suspending is looked at again later.
 */
import type { Logger } from '../../logging.ts';
import { ProvisioningError, type Instance, type InstanceSpec } from '../lifecycle.ts';
import { httpStatus } from './classify.ts';
import type { InstanceCalls } from './instance-calls.ts';
import { GcpRequestError, mapComputeError } from './lifecycle-errors.ts';
import { adoptInstance, stopReason, type ComputeInstance } from './lifecycle-instance.ts';
import { failedOperation } from './operations.ts';

export interface ReviveDeps {
  calls: InstanceCalls;
  log: Logger;
  /** Port of an instance whose metadata names none. */
  port: number;
}

/**
 * Starts a stopped or preempted instance (`start`) or resumes a suspended one (`resume`), awaiting the
 * operation, then reads it again: its ephemeral external address is a new one. A failure here is
 * retryable whatever the API said (the instance exists; a zone out of capacity for a spot VM, a
 * resourceNotReady race), except for access errors.
 */
async function restart(
  deps: ReviveDeps,
  inst: ComputeInstance,
  spec: InstanceSpec,
  zone: string,
  action: 'start' | 'resume',
  signal: AbortSignal,
): Promise<Instance> {
  const { calls, log } = deps;
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
  const instance = adoptInstance(fresh, spec, zone, deps.port);
  log.info(
    { instance: name, zone, proxy: spec.owner.proxy, status: String(fresh.status), endpoint: instance.endpoint?.host },
    `proxy instance ${action === 'start' ? 'started' : 'resumed'}`,
  );
  return instance;
}

/** An existing instance of ours, brought back when it was stopped, preempted or suspended. */
export async function reviveInstance(deps: ReviveDeps, inst: ComputeInstance, spec: InstanceSpec, zone: string, signal: AbortSignal): Promise<Instance> {
  const current = adoptInstance(inst, spec, zone, deps.port);
  const status = String(inst.status);
  if (status === 'TERMINATED' || status === 'STOPPED') return restart(deps, inst, spec, zone, 'start', signal);
  if (status === 'SUSPENDED') return restart(deps, inst, spec, zone, 'resume', signal);
  if (status === 'STOPPING' || status === 'SUSPENDING') {
    deps.log.info({ instance: spec.name, zone, proxy: spec.owner.proxy, status }, 'proxy instance is stopping; it is brought back once it has stopped');
    return { ...current, state: 'provisioning', message: `instance is ${status}; it is started again once it has stopped` };
  }
  return current;
}
