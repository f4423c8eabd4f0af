import type { ProviderHealth } from '../health/provider-health.ts';

/**
 * Where ProviderHealth (and, later, Proxy) objects live. A port: no Redis types cross it, so
 * a Kubernetes CRD implementation can take its place.
 */
export interface StatusStore {
  getProviderHealth(name: string, signal?: AbortSignal): Promise<ProviderHealth | undefined>;
  listProviderHealth(signal?: AbortSignal): Promise<ProviderHealth[]>;
  /**
   * Reads the current object, applies `update`, and writes the result only if nobody wrote
   * in between (retrying otherwise). `update` returning undefined leaves the object as it is.
   * Returns what is stored afterwards.
   */
  updateProviderHealth(
    name: string,
    update: (current: ProviderHealth | undefined) => ProviderHealth | undefined,
    signal?: AbortSignal,
  ): Promise<ProviderHealth | undefined>;
  deleteProviderHealth(name: string, signal?: AbortSignal): Promise<boolean>;
  /**
   * Makes the objects of these providers exist (without a status) where a store needs that before
   * status can be written: the Kubernetes store, whose publisher may write only the status
   * subresource (the leading scheduler calls it). Stores without that need leave it out.
   */
  ensureProviderHealth?(names: readonly string[], signal?: AbortSignal): Promise<void>;
}
