/**
 * Instance power actions of the fake Compute API, with the real status transitions:
 * - stop:    RUNNING (or PROVISIONING, STAGING, SUSPENDED) → STOPPING → TERMINATED; ephemeral external
 *            addresses are released. A TERMINATED instance: the operation completes with no change.
 * - start:   TERMINATED/STOPPED → STAGING → RUNNING with a new ephemeral address. RUNNING: no change.
 * - suspend: RUNNING → SUSPENDING → SUSPENDED; ephemeral addresses released. SUSPENDED: no change.
 * - resume:  SUSPENDED → STAGING → RUNNING with a new ephemeral address.
 * - delete:  any → STOPPING → gone.
 * Any other combination (start while STOPPING, resume a RUNNING instance…) is 400 `resourceNotReady`,
 * as the real API answers an action on an instance in the wrong state. A failed operation leaves the
 * instance as it was.
 * Preemption (`preempt`) is what Compute does to a spot VM: TERMINATED at once, addresses released,
 * and a DONE `compute.instances.preempted` operation recorded in the zone.
 */
import { computeError, notFound } from './errors.ts';
import { computeTime, type ComputeState, type FakeInstance, type FakeOperation, type InstanceStatus } from './state.ts';

export type InstanceAction = 'delete' | 'stop' | 'start' | 'suspend' | 'resume';
export const INSTANCE_ACTIONS: readonly string[] = ['stop', 'start', 'suspend', 'resume'];

const notReady = (p: string, zone: string, name: string) =>
  computeError(400, 'resourceNotReady', `The resource 'projects/${p}/zones/${zone}/instances/${name}' is not ready`);

interface Transition {
  /** Statuses the action is accepted from, and the status the instance has while the operation runs. */
  from: InstanceStatus[];
  during: InstanceStatus;
  /** Statuses in which the action is a no-op that still answers a (completing) operation. */
  noop: InstanceStatus[];
  done: (state: ComputeState, inst: FakeInstance) => void;
}

const TRANSITIONS: Record<Exclude<InstanceAction, 'delete'>, Transition> = {
  stop: {
    from: ['RUNNING', 'PROVISIONING', 'STAGING', 'SUSPENDED', 'REPAIRING'],
    during: 'STOPPING',
    noop: ['TERMINATED', 'STOPPED'],
    done: (state, inst) => {
      inst.status = 'TERMINATED';
      inst.lastStopTimestamp = computeTime();
      state.releaseExternalIps(inst);
    },
  },
  start: {
    from: ['TERMINATED', 'STOPPED'],
    during: 'STAGING',
    noop: ['RUNNING'],
    done: (state, inst) => {
      inst.status = 'RUNNING';
      inst.lastStartTimestamp = computeTime();
      state.assignExternalIps(inst);
    },
  },
  suspend: {
    from: ['RUNNING'],
    during: 'SUSPENDING',
    noop: ['SUSPENDED'],
    done: (state, inst) => {
      inst.status = 'SUSPENDED';
      inst.lastSuspendedTimestamp = computeTime();
      state.releaseExternalIps(inst);
    },
  },
  resume: {
    from: ['SUSPENDED'],
    during: 'STAGING',
    noop: [],
    done: (state, inst) => {
      inst.status = 'RUNNING';
      inst.lastStartTimestamp = computeTime();
      state.assignExternalIps(inst);
    },
  },
};

export function instanceAction(state: ComputeState, p: string, zone: string, name: string, action: InstanceAction): FakeOperation {
  const key = state.key(zone, name);
  const inst = state.instances.get(key);
  if (!inst) throw notFound(`projects/${p}/zones/${zone}/instances/${name}`);
  const before = inst.status;
  if (action === 'delete') {
    inst.status = 'STOPPING';
    return state.startOperation(
      zone,
      'delete',
      inst,
      () => void state.instances.delete(key),
      () => void (inst.status = before),
    );
  }
  const t = TRANSITIONS[action];
  if (t.noop.includes(before)) return state.startOperation(zone, action, inst, () => undefined);
  if (!t.from.includes(before)) throw notReady(p, zone, name);
  inst.status = t.during;
  return state.startOperation(
    zone,
    action,
    inst,
    () => t.done(state, inst),
    () => void (inst.status = before),
  );
}

/**
 * Preempts a spot VM: the instance is marked as one (`scheduling.provisioningModel: SPOT`) if it was not,
 * turns TERMINATED with its ephemeral addresses released, and the zone records a DONE
 * `compute.instances.preempted` operation. A `start` brings it back with a new address.
 */
export function preempt(state: ComputeState, zone: string, name: string): FakeOperation {
  const inst = state.instances.get(state.key(zone, name));
  if (!inst) throw new Error(`no instance ${zone}/${name}`);
  const scheduling = (inst.scheduling ?? {}) as Record<string, unknown>;
  inst.scheduling = { ...scheduling, provisioningModel: 'SPOT', preemptible: true, instanceTerminationAction: scheduling.instanceTerminationAction ?? 'STOP' };
  inst.status = 'TERMINATED';
  inst.lastStopTimestamp = computeTime();
  state.releaseExternalIps(inst);
  return state.recordDoneOperation(zone, 'compute.instances.preempted', inst);
}
