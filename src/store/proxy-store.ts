import { EgressError } from '../errors.ts';
import type { Proxy, ProxyDocument } from '../model/proxy-resource.ts';
import type { ProxyCredentials } from '../model/proxy-credentials.ts';

/**
 * Where Proxy objects and their credentials live. A port, like StatusStore: no Redis types cross
 * it, so a Kubernetes CRD implementation can take the place of RedisProxyStore. Consumers depend
 * on the narrow part they use (a reader, the status writer…); only the roles that build the
 * store see all of it.
 *
 * Rules every implementation keeps:
 * - listing never reads a secret: credentials are read only through ProxyCredentialsReader;
 * - every write of one proxy is a compare-and-set, so concurrent writers never lose a change;
 * - credentials exist before the proxy does (`apply` writes them first), so a reconcile never
 *   sees a proxy without them.
 */

export type ApplyOutcome = 'created' | 'configured' | 'unchanged';

export class ProxyTerminatingError extends EgressError {
  /** The proxies being deleted that the apply named. */
  readonly names: readonly string[];
  /** `names` of the proxies being deleted; `documents`, how many the apply had (when more than one, nothing of it was applied). */
  constructor(names: string | readonly string[], documents = 1) {
    const list = typeof names === 'string' ? [names] : names;
    const quoted = list.map((n) => `"${n}"`).join(', ');
    super(
      'ERR_PROXY_TERMINATING',
      documents <= 1 && list.length === 1
        ? `proxy ${quoted} is being deleted; apply it again once it is gone`
        : `rejected, nothing applied: ${list.length === 1 ? `proxy ${quoted} is` : `proxies ${quoted} are`} being deleted; apply again once ${list.length === 1 ? 'it is' : 'they are'} gone`,
    );
    this.names = list;
  }
}

/** Reads Proxy objects (never their credentials). */
export interface ProxyReader {
  get(name: string, signal?: AbortSignal): Promise<Proxy | undefined>;
  /** Several proxies in one round trip (undefined for those that do not exist), in the order of `names`. */
  getMany(names: readonly string[], signal?: AbortSignal): Promise<(Proxy | undefined)[]>;
  /** Every proxy, sorted by name. */
  list(signal?: AbortSignal): Promise<Proxy[]>;
  /**
   * Where the store keeps a change feed (Redis): the proxies written and the names removed since
   * `revision`, or every proxy (`full`) when `revision` is undefined or older than the feed. For
   * readers that poll (the pick member cache).
   */
  changesSince?(revision: number | undefined, signal?: AbortSignal): Promise<ProxyChanges>;
  /** Where the store selects by label (Kubernetes): the proxies of pools, for readers that poll and may be a moment behind. */
  listPoolMembers?(signal?: AbortSignal): Promise<Proxy[]>;
}

/** What changed among the proxies since a revision. */
export interface ProxyChanges {
  revision: number;
  full: boolean;
  written: Proxy[];
  removed: string[];
}

/** Reads the credentials a proxy's forward proxy requires. */
export interface ProxyCredentialsReader {
  credentials(name: string, signal?: AbortSignal): Promise<ProxyCredentials | undefined>;
  /** The credentials of several proxies in one round trip (discovery lists many). */
  credentialsOf(names: readonly string[], signal?: AbortSignal): Promise<(ProxyCredentials | undefined)[]>;
}

/** The desired state, as users change it (the API): apply and delete requests. */
export interface ProxySpecWriter {
  /**
   * Creates the proxy or updates its labels and spec; the generation moves only when they
   * change. Credentials are generated once, before the proxy exists. A proxy being deleted is
   * refused with ProxyTerminatingError.
   */
  apply(doc: ProxyDocument, signal?: AbortSignal): Promise<{ proxy: Proxy; outcome: ApplyOutcome }>;
  /**
   * Marks the proxy for deletion; it stays (Terminating) until its instance is gone. With
   * `orphan`, reconcile forgets the proxy without removing its instance. Asking again with
   * `orphan` turns a pending deletion into an orphaning one. NotFoundError when there is no such proxy.
   */
  requestDeletion(name: string, options?: { orphan?: boolean }, signal?: AbortSignal): Promise<Proxy>;
}

/** The observed state, as reconcile, the probe loop and the exit watch write it. */
export interface ProxyStatusWriter {
  /** Writes status (and nothing else) through `update` (undefined: leave it); a proxy that is gone stays gone. */
  updateStatus(name: string, update: (current: Proxy) => Proxy['status'] | undefined, signal?: AbortSignal): Promise<Proxy | undefined>;
}

/** Forgets a proxy whose instance is gone. */
export interface ProxyRemover {
  /** Removes the proxy and its credentials; no error when it is already gone. */
  remove(name: string, signal?: AbortSignal): Promise<void>;
}

/** What reconcile uses: read the proxy and its credentials, write its status, forget it once deleted. */
export type ReconcileStore = ProxyReader & ProxyCredentialsReader & ProxyStatusWriter & ProxyRemover;

/** What the proxy API uses: the desired state and discovery (which hands out credentials). */
export type ProxyApiStore = ProxyReader & ProxyCredentialsReader & ProxySpecWriter;

/** The whole port, for the roles that build a store and hand its parts out. */
export interface ProxyStore extends ProxyReader, ProxyCredentialsReader, ProxySpecWriter, ProxyStatusWriter, ProxyRemover {
  /** Waits for writes in progress; the connection belongs to the caller. */
  close(): Promise<void>;
}

/**
 * Reports the proxies whose desired state changed outside our API (`kubectl apply` of a Proxy
 * object) by calling `onChange(name)`, until `signal` ends; with `onPoolChange`, also the pools whose
 * desired state changed (`kubectl apply` of a ProxyPool) or one of whose members changed. Only stores
 * whose objects others write have one (the Kubernetes store's watch).
 */
export interface ProxyChangeFeed {
  run(onChange: (name: string) => void, signal: AbortSignal, onPoolChange?: (pool: string) => void): Promise<void>;
}
