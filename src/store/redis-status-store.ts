import type { RedisClient } from '../redis/connections.ts';
import type { ProviderHealth } from '../health/provider-health.ts';
import { RedisJsonCollection } from './redis-json-collection.ts';
import type { StatusStore } from './status-store.ts';

export { StoreConflictError } from './redis-json-collection.ts';

/**
 * ProviderHealth objects as JSON strings under `<prefix>:providerhealth:<name>`, with an index
 * set `<prefix>:providerhealths` (see RedisJsonCollection for the transaction rules).
 */
export class RedisStatusStore implements StatusStore {
  readonly #health: RedisJsonCollection<ProviderHealth>;

  constructor(redis: RedisClient, prefix: string) {
    this.#health = new RedisJsonCollection(redis, prefix, 'providerhealth');
  }

  close(): Promise<void> {
    return this.#health.close();
  }

  getProviderHealth(name: string, signal?: AbortSignal): Promise<ProviderHealth | undefined> {
    return this.#health.get(name, signal);
  }

  listProviderHealth(signal?: AbortSignal): Promise<ProviderHealth[]> {
    return this.#health.list(signal);
  }

  updateProviderHealth(
    name: string,
    update: (current: ProviderHealth | undefined) => ProviderHealth | undefined,
    signal?: AbortSignal,
  ): Promise<ProviderHealth | undefined> {
    return this.#health.update(name, update, signal);
  }

  deleteProviderHealth(name: string, signal?: AbortSignal): Promise<boolean> {
    return this.#health.delete(name, signal);
  }
}
