/**
 * The lifecycle's calls on one Pod, Secret or Service, with the caller's signal on each request and the
 * failure mapped (lifecycle-errors.ts): read (404 → undefined), create (409 → `exists`; a 403 explained by
 * a SelfSubjectAccessReview, access-review.ts), delete-if-ours (404 → done).
 */
import type { CoreV1Api, V1ObjectMeta, V1Secret, V1Service } from '@kubernetes/client-node';
import type { Logger } from '../../logging.ts';
import { ForeignInstanceError, ProvisioningError, type InstanceOwner } from '../lifecycle.ts';
import type { ForbiddenCreateExplainer } from './access-review.ts';
import { apiStatus, mapKubeError } from './lifecycle-errors.ts';
import { notOwnedBy } from './lifecycle-owner.ts';
import { raceAbort, withSignal } from '../../clients/kubernetes/request-options.ts';

export type Kind = 'Pod' | 'Secret' | 'Service';
const PLURAL: Record<Kind, string> = { Pod: 'pods', Secret: 'secrets', Service: 'services' };

/** `creating Pod "x" in namespace "y"`: how errors name a call. */
export function describeCall(verb: string, kind: Kind, name: string, namespace: string): string {
  return `${verb} ${kind} "${name}" in namespace "${namespace}"`;
}

/** The calls `objectCalls` gives: call, read, create, removeIfOurs. */
export type ObjectCalls = ReturnType<typeof objectCalls>;

export function objectCalls(api: CoreV1Api, explainForbidden: ForbiddenCreateExplainer, log: Logger) {
  /** Runs one API call with the signal; maps its failure. */
  async function call<T>(what: string, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    try {
      return await raceAbort(fn(), signal);
    } catch (err) {
      throw mapKubeError(err, what, signal);
    }
  }

  /** The object, or undefined when there is none (404). */
  async function read<T>(kind: Kind, name: string, namespace: string, signal: AbortSignal): Promise<T | undefined> {
    const fetchOne = (): Promise<unknown> => {
      const o = withSignal(signal);
      if (kind === 'Pod') return api.readNamespacedPod({ name, namespace }, o);
      if (kind === 'Secret') return api.readNamespacedSecret({ name, namespace }, o);
      return api.readNamespacedService({ name, namespace }, o);
    };
    try {
      return (await raceAbort(fetchOne(), signal)) as T;
    } catch (err) {
      if (!signal.aborted && apiStatus(err) === 404) return undefined;
      throw mapKubeError(err, describeCall('reading', kind, name, namespace), signal);
    }
  }

  /**
   * Creates the object; `exists` when it is already there (409 AlreadyExists: a concurrent ensure made it,
   * or a crashed one did). A 403 is explained by a SelfSubjectAccessReview (quota/admission vs. RBAC).
   */
  async function create<T extends { metadata?: V1ObjectMeta }>(kind: Kind, body: T, signal: AbortSignal): Promise<T | 'exists'> {
    const name = body.metadata?.name ?? '';
    const namespace = body.metadata?.namespace ?? '';
    const what = describeCall('creating', kind, name, namespace);
    const send = (): Promise<unknown> => {
      const o = withSignal(signal);
      if (kind === 'Pod') return api.createNamespacedPod({ namespace, body }, o);
      if (kind === 'Secret') return api.createNamespacedSecret({ namespace, body }, o);
      return api.createNamespacedService({ namespace, body }, o);
    };
    try {
      return (await raceAbort(send(), signal)) as T;
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      const code = apiStatus(err);
      if (code === 409) return 'exists';
      if (code !== 403) throw mapKubeError(err, what, signal, true);
      const explained = await explainForbidden(err, { resource: PLURAL[kind], namespace, what }, signal);
      // A quota counts the object a concurrent ensure already made: a duplicate create is refused, not 409.
      if (explained instanceof ProvisioningError && (await read(kind, name, namespace, signal))) return 'exists';
      throw explained;
    }
  }

  /**
   * Deletes the object if it is `owner`'s (this fleet's and this proxy's); 404 counts as done. The
   * delete carries the uid it checked as a precondition, so an object replaced in between is not hit.
   */
  async function removeIfOurs(kind: 'Secret' | 'Service', name: string, namespace: string, owner: InstanceOwner, signal: AbortSignal): Promise<void> {
    const found = await read<V1Secret | V1Service>(kind, name, namespace, signal);
    if (!found) return;
    const foreign = notOwnedBy(found, owner);
    if (foreign) {
      log.warn({ instance: name, namespace, kind, reason: foreign }, 'object is not ours; not deleting it');
      throw new ForeignInstanceError(name, `${kind} in namespace "${namespace}": ${foreign}`);
    }
    try {
      const o = withSignal(signal);
      const body = found.metadata?.uid ? { preconditions: { uid: found.metadata.uid } } : undefined;
      const sent: Promise<unknown> =
        kind === 'Secret' ? api.deleteNamespacedSecret({ name, namespace, body }, o) : api.deleteNamespacedService({ name, namespace, body }, o);
      await raceAbort(sent, signal);
      log.info({ instance: name, namespace, kind }, `proxy ${kind} deleted`);
    } catch (err) {
      if (!signal.aborted && apiStatus(err) === 404) return;
      throw mapKubeError(err, describeCall('deleting', kind, name, namespace), signal);
    }
  }

  return { call, read, create, removeIfOurs };
}
