/** The delete path of the gcp lifecycle: the instance goes only when it carries our labels with the expected owner; its zone operation is awaited. */
import type { Logger } from '../../logging.ts';
import { ForeignInstanceError, foreignOwner, type InstanceOwner } from '../lifecycle.ts';
import { httpStatus } from './classify.ts';
import type { InstanceCalls } from './instance-calls.ts';
import type { Operation } from './lifecycle-calls.ts';
import { mapComputeError } from './lifecycle-errors.ts';
import { FLEET_LABEL, PROXY_LABEL, isManaged } from './lifecycle-instance.ts';
import { failedOperation } from './operations.ts';

export async function deleteOwnInstance(
  calls: InstanceCalls,
  log: Logger,
  name: string,
  zone: string,
  owner: InstanceOwner,
  signal: AbortSignal,
): Promise<void> {
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
}
