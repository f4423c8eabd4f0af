import { randomUUID } from 'node:crypto';
import { NotFoundError } from '../errors.ts';
import { generateCredentials, type ProxyCredentials } from '../model/proxy-credentials.ts';
import type { Proxy, ProxyDocument } from '../model/proxy-resource.ts';
import { MemoryCollection, run, updateStatusOf, type MemoryChanges } from './memory-collection.ts';
import { ProxyTerminatingError, type ApplyOutcome, type ProxyStore } from './proxy-store.ts';

/**
 * Proxies and their credentials in this process's memory: the ProxyStore port without Redis, for
 * pure tests and embedding. It keeps the port's rules as RedisProxyStore does (the conformance suite
 * in test/store/ runs both): credentials live in a collection of their own, generated once and
 * before the proxy exists; the generation moves only when the spec or labels change; a change feed
 * with revisions (`changesSince`) like the Redis store's. Each write is one synchronous step
 * (MemoryCollection), so concurrent compare-and-set writers never lose a change.
 */
export class MemoryProxyStore implements ProxyStore {
  readonly #proxies = new MemoryCollection<Proxy>();
  readonly #secrets = new MemoryCollection<ProxyCredentials>();
  readonly #now: () => Date;

  constructor(now: () => Date = () => new Date()) {
    this.#now = now;
  }

  get(name: string, signal?: AbortSignal): Promise<Proxy | undefined> {
    return this.#proxies.get(name, signal);
  }

  getMany(names: readonly string[], signal?: AbortSignal): Promise<(Proxy | undefined)[]> {
    return this.#proxies.getMany(names, signal);
  }

  list(signal?: AbortSignal): Promise<Proxy[]> {
    return this.#proxies.list(signal);
  }

  /** The proxies written and removed since `revision` (all of them when undefined): see MemoryCollection.changesSince. */
  changesSince(revision: number | undefined, signal?: AbortSignal): Promise<MemoryChanges<Proxy>> {
    return this.#proxies.changesSince(revision, signal);
  }

  credentials(name: string, signal?: AbortSignal): Promise<ProxyCredentials | undefined> {
    return this.#secrets.get(name, signal);
  }

  credentialsOf(names: readonly string[], signal?: AbortSignal): Promise<(ProxyCredentials | undefined)[]> {
    return this.#secrets.getMany(names, signal);
  }

  /**
   * Creates the proxy or updates its labels and spec; the generation moves only when they change.
   * Credentials are generated once, in the same step and before the proxy exists. A proxy being
   * deleted is refused with ProxyTerminatingError.
   */
  apply(doc: ProxyDocument, signal?: AbortSignal): Promise<{ proxy: Proxy; outcome: ApplyOutcome }> {
    return run(signal, () => {
      const name = doc.metadata.name;
      this.#secrets.updateNow(name, (current) => current ?? generateCredentials(name));
      let outcome: ApplyOutcome = 'unchanged';
      const stored = this.#proxies.updateNow(name, (current) => {
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
        if (JSON.stringify(current.spec) === JSON.stringify(spec) && JSON.stringify(current.labels) === JSON.stringify(labels)) return undefined;
        outcome = 'configured';
        return { ...current, labels, spec, metadata: { ...current.metadata, generation: current.metadata.generation + 1 } };
      });
      if (!stored) throw new NotFoundError('proxy', name);
      return { proxy: stored, outcome };
    });
  }

  /**
   * Marks the proxy for deletion; it stays (Terminating) until remove. With `orphan`, reconcile
   * forgets the proxy without removing its instance; asking again with `orphan` turns a pending
   * deletion into an orphaning one. NotFoundError when there is no such proxy.
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
    return updateStatusOf(this.#proxies, name, update, signal);
  }

  /** Forgets the proxy and its credentials, in one step; no error when it is already gone. */
  remove(name: string, signal?: AbortSignal): Promise<void> {
    return run(signal, () => {
      this.#proxies.deleteNow(name);
      this.#secrets.deleteNow(name);
    });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
