import type { ProviderHealth } from '../health/provider-health.ts';
import { run } from './memory-collection.ts';
import type { StatusStore } from './status-store.ts';

/**
 * ProviderHealth objects in this process's memory: the StatusStore port without Redis, for pure
 * tests and embedding. It keeps the port's rules as the Redis store does (the conformance suite
 * in test/store/ runs both): objects go in and come out as copies, an update is atomic (applied
 * in one synchronous step, so concurrent updates never lose each other), an ended signal rejects
 * and writes nothing, and lists are sorted by name.
 */
export class MemoryStatusStore implements StatusStore {
  readonly #health = new Map<string, ProviderHealth>();

  getProviderHealth(name: string, signal?: AbortSignal): Promise<ProviderHealth | undefined> {
    return run(signal, () => copy(this.#health.get(name)));
  }

  listProviderHealth(signal?: AbortSignal): Promise<ProviderHealth[]> {
    return run(signal, () =>
      [...this.#health.keys()].sort().flatMap((name) => {
        const health = copy(this.#health.get(name));
        return health ? [health] : [];
      }),
    );
  }

  updateProviderHealth(
    name: string,
    update: (current: ProviderHealth | undefined) => ProviderHealth | undefined,
    signal?: AbortSignal,
  ): Promise<ProviderHealth | undefined> {
    return run(signal, () => {
      const next = update(copy(this.#health.get(name)));
      if (next !== undefined) this.#health.set(name, structuredClone(next));
      return copy(this.#health.get(name));
    });
  }

  deleteProviderHealth(name: string, signal?: AbortSignal): Promise<boolean> {
    return run(signal, () => this.#health.delete(name));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

function copy(health: ProviderHealth | undefined): ProviderHealth | undefined {
  return health === undefined ? undefined : structuredClone(health);
}
