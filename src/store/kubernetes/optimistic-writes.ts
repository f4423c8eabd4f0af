import { isDeepStrictEqual } from 'node:util';
import { NotFoundError } from '../../errors.ts';
import { KubernetesConflictError, httpStatus, storeError } from './errors.ts';
import type { CustomObject, ResourceClient } from './resource-client.ts';

/**
 * The write patterns the Kubernetes stores share. Every write carries the resourceVersion it read, so
 * a writer that lost to another one gets a 409: it reads again and retries, at most MAX_ATTEMPTS times,
 * then gives up with a retryable KubernetesConflictError.
 */

/** Optimistic writes of one object that lose to another writer (409) are read and tried again this often at most. */
export const MAX_ATTEMPTS = 10;

/**
 * Runs `attempt` (a read, then a write with what it read) until it does not end in a 409. Any other
 * failure is wrapped by `storeError`, naming `what` (domain errors such as NotFoundError pass through).
 */
export async function retryOnConflict<T>(what: string, subject: string, signal: AbortSignal, attempt: () => Promise<T>): Promise<T> {
  let lastConflict: unknown;
  for (let i = 0; i < MAX_ATTEMPTS; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (httpStatus(err) !== 409 || signal.aborted) throw storeError(err, what, signal);
      lastConflict = err;
    }
  }
  throw new KubernetesConflictError(subject, MAX_ATTEMPTS, { cause: lastConflict });
}

/** The resource as messages name it: `Proxy "web"`. */
export interface ObjectRef {
  /** The kind, as in `ProxyPool`. */
  kind: string;
  /** What NotFoundError calls it, as in `pool`. */
  noun: string;
}

/**
 * Read-modify-write of an object (not its status); `change` returning undefined writes nothing. An
 * object that is missing (or goes missing) is a NotFoundError when `mustExist`, otherwise nothing to do.
 */
export async function modifyObject<Spec, Status>(
  client: ResourceClient<Spec, Status>,
  ref: ObjectRef,
  name: string,
  change: (obj: CustomObject<Spec, Status>) => CustomObject<Spec, Status> | undefined,
  signal: AbortSignal,
  mustExist = true,
): Promise<CustomObject<Spec, Status> | undefined> {
  return retryOnConflict(client.what('updating', name), `${ref.kind} "${name}"`, signal, async () => {
    const obj = await client.get(name, signal);
    if (!obj) {
      if (mustExist) throw new NotFoundError(ref.noun, name);
      return undefined;
    }
    const next = change(obj);
    if (!next) return obj;
    try {
      return await client.replace(next, signal);
    } catch (err) {
      if (httpStatus(err) === 404 && !mustExist && !signal.aborted) return undefined;
      throw err;
    }
  });
}

/**
 * Writes the status through `/status`: `update` sees the object as read and returns the status to
 * write, or undefined to leave it. `prepare`, when it returns an object, is written first (the object
 * itself, such as a finalizer added), in the same attempt. An object that is (or goes) missing is undefined.
 */
export async function writeStatus<Spec, Status>(
  client: ResourceClient<Spec, Status>,
  ref: ObjectRef,
  name: string,
  update: (obj: CustomObject<Spec, Status>) => Status | undefined,
  signal: AbortSignal,
  prepare: (obj: CustomObject<Spec, Status>) => CustomObject<Spec, Status> | undefined = () => undefined,
): Promise<CustomObject<Spec, Status> | undefined> {
  return retryOnConflict(client.what('writing the status of', name), `the status of ${ref.kind} "${name}"`, signal, async () => {
    let obj = await client.get(name, signal);
    if (!obj) return undefined;
    try {
      const prepared = prepare(obj);
      if (prepared) obj = await client.replace(prepared, signal);
      const status = update(obj);
      return status === undefined ? obj : await client.replaceStatus({ ...obj, status }, signal);
    } catch (err) {
      if (httpStatus(err) === 404 && !signal.aborted) return undefined;
      throw err;
    }
  });
}

/** The object with `finalizer` added (undefined when it has it, or is being deleted: no finalizer may be added then). */
export function withFinalizer<O extends CustomObject>(obj: O, finalizer: string): O | undefined {
  if (obj.metadata.deletionTimestamp || obj.metadata.finalizers?.includes(finalizer)) return undefined;
  return { ...obj, metadata: { ...obj.metadata, finalizers: [...(obj.metadata.finalizers ?? []), finalizer] } };
}

/**
 * An apply's write of the desired state: the object with `spec` and `labels` (and `finalizer`, if it
 * lacked it), replaced with the resourceVersion it was read at; undefined (nothing written) when
 * both are as they are.
 */
export async function replaceDesired<Spec, Status>(
  client: ResourceClient<Spec, Status>,
  current: CustomObject<Spec, Status>,
  desired: { spec: Spec; labels: Record<string, string> },
  finalizer: string,
  signal: AbortSignal,
): Promise<CustomObject<Spec, Status> | undefined> {
  if (isDeepStrictEqual(current.spec, desired.spec) && isDeepStrictEqual(current.metadata.labels ?? {}, desired.labels)) return undefined;
  const owned = withFinalizer(current, finalizer) ?? current;
  return client.replace({ ...owned, metadata: { ...owned.metadata, labels: desired.labels }, spec: desired.spec }, signal);
}

/** The object without `finalizer` (undefined when it has none). */
export function withoutFinalizer<O extends CustomObject>(obj: O, finalizer: string): O | undefined {
  if (!obj.metadata.finalizers?.includes(finalizer)) return undefined;
  return { ...obj, metadata: { ...obj.metadata, finalizers: obj.metadata.finalizers.filter((f) => f !== finalizer) } };
}

/**
 * Asks Kubernetes to delete the object (a finalizer keeps it, Terminating) and reads it back. Without
 * a finalizer the delete is immediate: then the object as it was, with a `deletionTimestamp` of now.
 * NotFoundError when there is no such object.
 */
export async function deleteAndRead<Spec, Status>(
  client: ResourceClient<Spec, Status>,
  ref: ObjectRef,
  name: string,
  signal: AbortSignal,
): Promise<CustomObject<Spec, Status>> {
  const current = await client.get(name, signal);
  if (!current) throw new NotFoundError(ref.noun, name);
  if (!current.metadata.deletionTimestamp) await client.delete(name, signal);
  const after = await client.get(name, signal);
  return after ?? { ...current, metadata: { ...current.metadata, deletionTimestamp: new Date().toISOString() } };
}

/** Removes `finalizer` so Kubernetes can delete the object, deleting it first if nobody had; nothing when it is gone. */
export async function releaseObject<Spec, Status>(
  client: ResourceClient<Spec, Status>,
  ref: ObjectRef,
  name: string,
  finalizer: string,
  signal: AbortSignal,
): Promise<void> {
  const obj = await client.get(name, signal);
  if (obj && !obj.metadata.deletionTimestamp) await client.delete(name, signal);
  await modifyObject(client, ref, name, (current) => withoutFinalizer(current, finalizer), signal, false);
}
