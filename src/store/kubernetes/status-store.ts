import { isDeepStrictEqual } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import type { ProviderHealth, ProviderHealthStatus } from '../../health/provider-health.ts';
import { GROUP_VERSION, targetsReady } from '../../crds/resources.ts';
import type { StatusStore } from '../status-store.ts';
import { KubernetesStoreError, httpStatus, storeError } from './errors.ts';
import { retryOnConflict } from './optimistic-writes.ts';
import { ResourceClient, type CustomObject } from './resource-client.ts';
import { UpdateBatcher, type Updater } from '../update-batcher.ts';

type ResourceStatus = ProviderHealthStatus & { targetsReady?: string };
type HealthObject = CustomObject<never, ResourceStatus>;

const never = new AbortController().signal;

/** The domain object of a ProviderHealth resource; undefined while it has no status yet. */
function toDomain(obj: HealthObject | undefined): ProviderHealth | undefined {
  if (!obj?.status) return undefined;
  const { ready, lastTransitionTime, lastCheckTime, targets } = obj.status;
  return { name: obj.metadata.name, status: { ready, lastTransitionTime, lastCheckTime, targets: targets ?? [] } };
}

function toResourceStatus(health: ProviderHealth): ResourceStatus {
  return { ...health.status, targetsReady: targetsReady(health.status.targets) };
}

/**
 * ProviderHealth as cluster-scoped custom resources (`kubectl get ph`), for `--store kubernetes`.
 * The object is created bare, then its status is written through the status subresource with the
 * resourceVersion it was read at: a 409 (someone wrote in between) reads again and re-applies the
 * updates, at most MAX_ATTEMPTS times. Updates of one object that queue up while a write runs are
 * folded into the next write (one read, one PUT), as the Redis store does; the publisher's rules
 * (`lastTransitionTime` only on a flip) live in the updates and are unchanged.
 */
export class KubernetesStatusStore implements StatusStore {
  readonly #client: ResourceClient<never, ResourceStatus>;
  readonly #batcher: UpdateBatcher<ProviderHealth>;

  constructor(kc: KubeConfig) {
    this.#client = new ResourceClient(kc, { plural: 'providerhealths', namespace: undefined });
    this.#batcher = new UpdateBatcher((name, updates, signal) => this.#write(name, updates, signal));
  }

  async getProviderHealth(name: string, signal: AbortSignal = never): Promise<ProviderHealth | undefined> {
    return toDomain(await this.#client.get(name, signal));
  }

  async listProviderHealth(signal: AbortSignal = never): Promise<ProviderHealth[]> {
    const { items } = await this.#client.list(signal);
    return items.flatMap((obj) => toDomain(obj) ?? []).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async updateProviderHealth(
    name: string,
    update: (current: ProviderHealth | undefined) => ProviderHealth | undefined,
    signal?: AbortSignal,
  ): Promise<ProviderHealth | undefined> {
    signal?.throwIfAborted();
    const stored = await this.#batcher.update(name, update, signal);
    return stored === undefined ? undefined : structuredClone(stored);
  }

  deleteProviderHealth(name: string, signal: AbortSignal = never): Promise<boolean> {
    return this.#client.delete(name, signal);
  }

  /** Creates the ProviderHealth objects that do not exist yet, without a status (someone else's create wins). */
  async ensureProviderHealth(names: readonly string[], signal: AbortSignal = never): Promise<void> {
    for (const name of names) {
      try {
        await this.#client.create({ apiVersion: GROUP_VERSION, kind: 'ProviderHealth', metadata: { name } }, signal);
      } catch (err) {
        if (httpStatus(err) !== 409 || signal.aborted) throw storeError(err, this.#client.what('creating', name), signal);
      }
    }
  }

  /** Waits for writes in progress. */
  close(): Promise<void> {
    return this.#batcher.close();
  }

  /**
   * The bare object, when the leading scheduler has not made it yet. A publisher whose RBAC allows only
   * `providerhealths/status` gets a 403 here: retryable, as the scheduler makes the object on leading.
   */
  async #create(name: string, signal: AbortSignal): Promise<HealthObject> {
    try {
      return await this.#client.create({ apiVersion: GROUP_VERSION, kind: 'ProviderHealth', metadata: { name } }, signal);
    } catch (err) {
      if (httpStatus(err) === 403 && !signal.aborted) {
        throw new KubernetesStoreError(
          `ProviderHealth "${name}" does not exist yet and this role may not create it; the leading scheduler creates it`,
          403,
          'Forbidden',
          {
            cause: err,
            retryable: true,
          },
        );
      }
      throw err;
    }
  }

  /** One read and one status write for all `updates`; a 409 (AlreadyExists on the create, Conflict on the write: someone wrote first) reads again. */
  #write(name: string, updates: readonly Updater<ProviderHealth>[], signal: AbortSignal): Promise<(ProviderHealth | undefined)[]> {
    return retryOnConflict(this.#client.what('writing', name), `ProviderHealth "${name}"`, signal, async () => {
      let obj = await this.#client.get(name, signal);
      const before = toDomain(obj);
      let current = before;
      const states = updates.map((update) => {
        current = update(current === undefined ? undefined : structuredClone(current)) ?? current;
        return current;
      });
      if (current === undefined || isDeepStrictEqual(current, before)) return states;
      obj ??= await this.#create(name, signal);
      await this.#client.replaceStatus({ ...obj, status: toResourceStatus(current) }, signal);
      return states;
    });
  }
}
