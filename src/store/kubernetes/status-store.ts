import { isDeepStrictEqual } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import type { ProviderHealth, ProviderHealthStatus } from '../../health/provider-health.ts';
import { GROUP_VERSION, providerHealthResourceStatusSchema, targetsReady } from '../../crds/resources.ts';
import type { StatusStore } from '../status-store.ts';
import { KubernetesStoreError, httpStatus, storeError } from './errors.ts';
import { retryOnConflict } from './optimistic-writes.ts';
import { ReadBackLog, beyondSkew, partReader, type KubernetesStoreOptions, type ReadContext } from './read-back.ts';
import { ResourceClient, type CustomObject } from './resource-client.ts';
import { UpdateBatcher, type Updater } from '../update-batcher.ts';

type ResourceStatus = ProviderHealthStatus & { targetsReady?: string };
type HealthObject = CustomObject<never, ResourceStatus>;

const never = new AbortController().signal;

const readStatus = partReader('status', providerHealthResourceStatusSchema);
const KIND = 'ProviderHealth';

/** The times of a ProviderHealth status that lie further in the future than the clock skew allows. */
function timesBeyondSkew(status: ProviderHealthStatus, now: Date): string[] {
  const late: string[] = [];
  if (beyondSkew(status.lastTransitionTime, now)) late.push('status.lastTransitionTime');
  if (beyondSkew(status.lastCheckTime, now)) late.push('status.lastCheckTime');
  status.targets.forEach((t, i) => {
    if (beyondSkew(t.lastTransitionTime, now)) late.push(`status.targets[${i}].lastTransitionTime`);
    if (beyondSkew(t.lastCheckTime, now)) late.push(`status.targets[${i}].lastCheckTime`);
  });
  return late;
}

/**
 * The domain object of a ProviderHealth resource; undefined while it has no status yet, and when its
 * status cannot be trusted, which then reads as none (the publisher derives a new one from the next
 * result, as for a new object):
 * - a status that breaks the API's schema;
 * - a status with a time later than the clock skew allows. The publisher orders results by these
 *   times (a result older than a target's `lastCheckTime` leaves it alone), so a forged time in the
 *   future would keep a forged `ready` against every check to come; clamping it to now would still
 *   outrank the result of a check that ran before this read.
 */
function toDomain(obj: HealthObject | undefined, ctx: ReadContext): ProviderHealth | undefined {
  if (obj?.status === undefined) return undefined;
  const read = readStatus(obj.status);
  if (!read.ok) {
    ctx.log?.report(KIND, obj.metadata, 'its status breaks the schema and is ignored (the next check result writes a new one)', read.problems);
    return undefined;
  }
  const { targetsReady: _column, ...status } = read.value;
  const late = timesBeyondSkew(status, ctx.now);
  if (late.length > 0) {
    ctx.log?.report(KIND, obj.metadata, 'its status has times in the future and is ignored (the next check result writes a new one)', late);
    return undefined;
  }
  return { name: obj.metadata.name, status };
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
  readonly #now: () => Date;
  readonly #log: ReadBackLog;

  constructor(kc: KubeConfig, options: KubernetesStoreOptions = {}) {
    this.#client = new ResourceClient(kc, { plural: 'providerhealths', namespace: undefined });
    this.#batcher = new UpdateBatcher((name, updates, signal) => this.#write(name, updates, signal));
    this.#now = options.now ?? (() => new Date());
    this.#log = new ReadBackLog(options.logger);
  }

  /** What reading objects back now is checked against. */
  #ctx(): ReadContext {
    return { now: this.#now(), log: this.#log };
  }

  async getProviderHealth(name: string, signal: AbortSignal = never): Promise<ProviderHealth | undefined> {
    return toDomain(await this.#client.get(name, signal), this.#ctx());
  }

  async listProviderHealth(signal: AbortSignal = never): Promise<ProviderHealth[]> {
    const { items } = await this.#client.list(signal);
    const ctx = this.#ctx();
    return items.flatMap((obj) => toDomain(obj, ctx) ?? []).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
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
      const before = toDomain(obj, this.#ctx());
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
