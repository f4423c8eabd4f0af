/**
 * The delete path of the kubernetes lifecycle: the Pod goes only when it is the expected owner's; its
 * Service and Secret follow once the Pod is gone (a terminating Pod still runs with its Secret).
 */
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../logging.ts';
import { ForeignInstanceError, type InstanceOwner } from '../lifecycle.ts';
import { raceAbort, withSignal } from '../../clients/kubernetes/request-options.ts';
import { describeCall, type ObjectCalls } from './lifecycle-calls.ts';
import { apiStatus, mapKubeError } from './lifecycle-errors.ts';
import { notOwnedBy } from './lifecycle-owner.ts';

export interface ObjectsDeleterDeps {
  api: CoreV1Api;
  calls: ObjectCalls;
  log: Logger;
  /** Whether instances have a Service (deleted with them). */
  withService: boolean;
}

export async function deleteOwnObjects(deps: ObjectsDeleterDeps, name: string, namespace: string, owner: InstanceOwner, signal: AbortSignal): Promise<void> {
  const { api, log } = deps;
  const { read, removeIfOurs } = deps.calls;
  const pod = await read<V1Pod>('Pod', name, namespace, signal);
  const foreign = pod ? notOwnedBy(pod, owner) : undefined;
  if (foreign) {
    // Its Secret and Service are left too: they are the Pod's owner's business, whoever that is.
    log.warn({ instance: name, namespace, reason: foreign }, 'Pod is not ours; not deleting it');
    throw new ForeignInstanceError(name, `Pod in namespace "${namespace}": ${foreign}`);
  }
  if (pod) {
    if (!pod.metadata?.deletionTimestamp) {
      try {
        const body = pod.metadata?.uid ? { preconditions: { uid: pod.metadata.uid } } : undefined;
        await raceAbort(api.deleteNamespacedPod({ name, namespace, body }, withSignal(signal)), signal);
        log.info({ instance: name, namespace }, 'proxy Pod deleted');
      } catch (err) {
        if (signal.aborted || apiStatus(err) !== 404) throw mapKubeError(err, describeCall('deleting', 'Pod', name, namespace), signal);
      }
    }
    // A terminating Pod still runs with its Secret: the rest goes once the Pod is gone (a later call).
    const still = await read<V1Pod>('Pod', name, namespace, signal);
    if (still) return;
  }
  if (deps.withService) await removeIfOurs('Service', name, namespace, owner, signal);
  await removeIfOurs('Secret', name, namespace, owner, signal);
}
