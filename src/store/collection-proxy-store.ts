import { randomUUID } from 'node:crypto';
import { NotFoundError } from '../errors.ts';
import { generateCredentials, type ProxyCredentials } from '../model/proxy-credentials.ts';
import type { Proxy, ProxyDocument } from '../model/proxy-resource.ts';
import { updateStatusIn, type CollectionChanges, type JsonCollection } from './json-collection.ts';
import { ProxyTerminatingError, type ApplyOutcome, type ProxyStore } from './proxy-store.ts';

/**
 * The ProxyStore port over two collections of JSON objects, the proxies and their credentials
 * (apart, so that listing proxies never reads a secret): the rules written once for every store that
 * keeps proxies as documents (Redis, memory). Credentials are generated once, before the proxy
 * exists, so a reconcile never sees a proxy without them; the generation moves only when the spec
 * or labels change; every write is one compare-and-set, so concurrent writers never lose a change.
 */
export class CollectionProxyStore implements ProxyStore {
  readonly #proxies: JsonCollection<Proxy>;
  readonly #secrets: JsonCollection<ProxyCredentials>;
  readonly #now: () => Date;

  constructor(collections: { proxies: JsonCollection<Proxy>; secrets: JsonCollection<ProxyCredentials> }, now: () => Date) {
    this.#proxies = collections.proxies;
    this.#secrets = collections.secrets;
    this.#now = now;
  }

  get(name: string, signal?: AbortSignal): Promise<Proxy | undefined> {
    return this.#proxies.get(name, signal);
  }

  /** Several proxies in one round trip (undefined for those that do not exist). */
  getMany(names: readonly string[], signal?: AbortSignal): Promise<(Proxy | undefined)[]> {
    return this.#proxies.getMany(names, signal);
  }

  list(signal?: AbortSignal): Promise<Proxy[]> {
    return this.#proxies.list(signal);
  }

  /** The proxies written and removed since `revision` (all of them when undefined): see JsonCollection.changesSince. */
  changesSince(revision: number | undefined, signal?: AbortSignal): Promise<CollectionChanges<Proxy>> {
    return this.#proxies.changesSince(revision, signal);
  }

  credentials(name: string, signal?: AbortSignal): Promise<ProxyCredentials | undefined> {
    return this.#secrets.get(name, signal);
  }

  /** The credentials of several proxies in one round trip (discovery lists many). */
  credentialsOf(names: readonly string[], signal?: AbortSignal): Promise<(ProxyCredentials | undefined)[]> {
    return this.#secrets.getMany(names, signal);
  }

  /**
   * Creates the proxy or updates its labels and spec; the generation moves only when they
   * change. Credentials are generated once, before the proxy exists. A proxy being deleted is
   * refused with ProxyTerminatingError.
   */
  async apply(doc: ProxyDocument, signal?: AbortSignal): Promise<{ proxy: Proxy; outcome: ApplyOutcome }> {
    const name = doc.metadata.name;
    await this.#secrets.update(name, (current) => current ?? generateCredentials(name), signal);
    let outcome: ApplyOutcome = 'unchanged';
    const stored = await this.#proxies.update(
      name,
      (current) => {
        const spec = { ...doc.spec };
        const labels = { ...doc.metadata.labels };
        if (!current) {
          outcome = 'created';
          return {
            name,
            labels,
            spec,
            metadata: { uid: randomUUID(), generation: 1, createdAt: this.#now().toISOString() },
            status: { phase: 'Pending', conditions: [], observedGeneration: 0 },
          };
        }
        if (current.metadata.deletionRequestedAt) throw new ProxyTerminatingError(name);
        // Computed again on a retried compare-and-set: the last computation is the outcome.
        outcome = 'unchanged';
        if (JSON.stringify(current.spec) === JSON.stringify(spec) && JSON.stringify(current.labels) === JSON.stringify(labels)) return undefined;
        outcome = 'configured';
        return { ...current, labels, spec, metadata: { ...current.metadata, generation: current.metadata.generation + 1 } };
      },
      signal,
    );
    if (!stored) throw new NotFoundError('proxy', name);
    return { proxy: stored, outcome };
  }

  /**
   * Marks the proxy for deletion; it stays (Terminating) until its instance is gone. With
   * `orphan`, reconcile forgets the proxy without removing its instance: an instance no proxy
   * owns is then GC's (removed by the sweep of its provider, if that provider is configured).
   * Asking again with `orphan` turns a pending deletion into an orphaning one.
   */
  async requestDeletion(name: string, options: { orphan?: boolean } = {}, signal?: AbortSignal): Promise<Proxy> {
    const orphan = options.orphan === true;
    const stored = await this.#proxies.update(
      name,
      (current) => {
        if (!current) throw new NotFoundError('proxy', name);
        if (current.metadata.deletionRequestedAt && (!orphan || current.metadata.orphanInstance)) return undefined;
        return {
          ...current,
          metadata: {
            ...current.metadata,
            deletionRequestedAt: current.metadata.deletionRequestedAt ?? this.#now().toISOString(),
            ...(orphan ? { orphanInstance: true } : {}),
          },
          status: { ...current.status, phase: 'Terminating' },
        };
      },
      signal,
    );
    if (!stored) throw new NotFoundError('proxy', name);
    return stored;
  }

  /** Writes status (and nothing else) through `update`; a proxy that is gone stays gone. */
  updateStatus(name: string, update: (current: Proxy) => Proxy['status'] | undefined, signal?: AbortSignal): Promise<Proxy | undefined> {
    return updateStatusIn(this.#proxies, name, update, signal);
  }

  /** Forgets a proxy whose instance is gone, and its credentials. */
  async remove(name: string, signal?: AbortSignal): Promise<void> {
    await this.#proxies.delete(name, signal);
    await this.#secrets.delete(name, signal);
  }

  async close(): Promise<void> {
    await this.#proxies.close();
    await this.#secrets.close();
  }
}
