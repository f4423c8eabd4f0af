import { EgressError, type EgressErrorOptions } from '../errors.ts';

/**
 * The proxy-instance side of a provider: what reconcile (create, delete) and the GC sweep
 * (inventory) need. No SDK or connection types cross it.
 *
 * Rules every implementation keeps:
 * - Instance names are deterministic (derived from the proxy's identity by the caller), so a
 *   retried, duplicated or crashed reconcile finds the instance it made instead of making a
 *   second one: `ensureInstance` is idempotent on `name`.
 * - Every instance carries the owner identity (labels, tags, libvirt metadata, a state file);
 *   `listInstances` returns only instances that carry it, and nothing without it is ever touched.
 * - Every call takes an AbortSignal that reaches every network call.
 * - Errors a retry cannot fix (quota, an invalid image) are `ProvisioningError`; anything else is
 *   transient and retried by the caller with backoff.
 */

/** Who owns an instance; stamped on it at create time. */
export interface InstanceOwner {
  /** The orchestrator installation (so two fleets sharing a project never collect each other's). */
  fleet: string;
  /** The Proxy resource's name. */
  proxy: string;
}

export interface ProxyCredentials {
  username: string;
  password: string;
}

export interface InstanceSpec {
  /** Deterministic name; the provider's naming rules apply (lower case, ≤ 63 characters). */
  name: string;
  owner: InstanceOwner;
  /** Basic Proxy-Authorization the forward proxy requires. Never logged. */
  credentials: ProxyCredentials;
  /** Where it goes, when the provider has a choice: a KVM host, a GCP zone, a Kubernetes namespace. */
  placement?: string;
}

export type InstanceState = 'provisioning' | 'running' | 'stopping' | 'stopped' | 'failed';

export interface Instance {
  name: string;
  /** The provider's own id (pod uid, GCE instance id, domain uuid, process id). */
  id: string;
  state: InstanceState;
  owner: InstanceOwner;
  placement?: string;
  /** Where a client reaches the forward proxy, once known. */
  endpoint?: { host: string; port: number };
  /** ISO time the instance was created (GC never deletes one younger than its grace period). */
  createdAt: string;
  /** The provider's words when the instance failed. */
  message?: string;
}

/** An instance the provider saw stop on its own (a local proxy process that exited). */
export interface InstanceExit {
  name: string;
  owner: InstanceOwner;
  /** The instance's id as `Instance.id` gave it (the local provider: the process id). */
  id: string;
  message: string;
}

export interface ProxyLifecycle {
  /** Creates the instance unless it exists; returns its current state either way. */
  ensureInstance(spec: InstanceSpec, signal: AbortSignal): Promise<Instance>;
  getInstance(name: string, placement: string | undefined, signal: AbortSignal): Promise<Instance | undefined>;
  /** Starts deleting the instance if it exists (no error when it does not). `getInstance` tells when it is gone. */
  deleteInstance(name: string, placement: string | undefined, signal: AbortSignal): Promise<void>;
  /**
   * The full inventory of instances carrying the owner identity of `fleet`, paged through. When any
   * part cannot be listed (a page fails, a zone or host is unreachable), the iteration throws, after
   * yielding what it could list or part-way: a caller never takes a partial inventory for the whole.
   */
  listInstances(fleet: string, signal: AbortSignal): AsyncIterable<Instance>;
  /**
   * Optional: calls `listener` as soon as an instance stops on its own, without waiting for a
   * probe (providers that can see it cheaply: the local provider watches its processes, adopted
   * ones included). Returns the unsubscribe function.
   */
  onInstanceExit?(listener: (exit: InstanceExit) => void): () => void;
}

/** A create that a retry cannot fix: quota exhausted, an invalid image or template. */
export class ProvisioningError extends EgressError {
  constructor(message: string, options: EgressErrorOptions = {}) {
    super('ERR_PROVISIONING', message, { ...options, retryable: false });
  }
}
