import { EgressError, type EgressErrorOptions } from '../errors.ts';
import type { ProxyCredentials } from '../model/proxy-credentials.ts';

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

/** Whose instance a delete expects to find, and whether its name alone may be trusted. */
export interface DeleteTarget {
  /** The object must carry this owner (fleet and proxy), or nothing is deleted. */
  owner: InstanceOwner;
  /**
   * True when the caller derived the name itself from its fleet and the proxy's uid (a reconcile of
   * the proxy), so that leftovers carrying no owner of their own (a kvm volume whose domain define
   * never happened) may go by that name. False for a name an inventory answered (GC): such parts
   * then go only with the tagged object that owns them.
   */
  nameIsOurs: boolean;
}

export interface ProxyLifecycle {
  /** Creates the instance unless it exists; returns its current state either way. */
  ensureInstance(spec: InstanceSpec, signal: AbortSignal): Promise<Instance>;
  getInstance(name: string, placement: string | undefined, signal: AbortSignal): Promise<Instance | undefined>;
  /**
   * Starts deleting the instance if it exists (no error when it does not). `getInstance` tells when it
   * is gone. What is about to be deleted is read first and must carry `owner` — this fleet and this
   * proxy — or nothing is deleted and `ForeignInstanceError` says whose it is: an inventory or a name
   * is never enough on its own. Parts that carry no owner of their own (kvm volumes) go only with the
   * object that owns them.
   */
  deleteInstance(name: string, placement: string | undefined, target: DeleteTarget, signal: AbortSignal): Promise<void>;
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

/**
 * A delete found an object that is not the expected owner's: without our labels or tag, or another
 * fleet's or another proxy's. Nothing was deleted; a retry would find the same.
 */
export class ForeignInstanceError extends EgressError {
  readonly instance: string;
  constructor(instance: string, whose: string, options: EgressErrorOptions = {}) {
    super('ERR_FOREIGN_INSTANCE', `not deleting "${instance}": ${whose}`, { ...options, retryable: false });
    this.instance = instance;
  }
}

/**
 * Why `found` (the owner an object carries; undefined: no owner labels or tag at all) is not
 * `expected`'s, or undefined when it is.
 */
export function foreignOwner(found: Partial<InstanceOwner> | undefined, expected: InstanceOwner): string | undefined {
  if (found?.fleet === undefined || found.proxy === undefined) return 'it carries no owner labels or tag of egress-proxies';
  if (found.fleet !== expected.fleet) return `it belongs to fleet "${found.fleet}", not "${expected.fleet}"`;
  if (found.proxy !== expected.proxy) return `it belongs to proxy "${found.proxy}", not "${expected.proxy}"`;
  return undefined;
}

/**
 * Why an ensure must leave alone an object of the instance's name that carries `found` as its owner:
 * `belongs to proxy "p" of fleet "f", not "P" of "F"`; undefined when it is `expected`'s.
 */
export function otherProxyReason(found: InstanceOwner, expected: InstanceOwner): string | undefined {
  if (found.fleet === expected.fleet && found.proxy === expected.proxy) return undefined;
  return `belongs to proxy "${found.proxy}" of fleet "${found.fleet}", not "${expected.proxy}" of "${expected.fleet}"`;
}

/** A create that a retry cannot fix: quota exhausted, an invalid image or template. */
export class ProvisioningError extends EgressError {
  constructor(message: string, options: EgressErrorOptions = {}) {
    super('ERR_PROVISIONING', message, { ...options, retryable: false });
  }
}
