import type { KubeConfig, V1Secret } from '@kubernetes/client-node';
import { generateCredentials } from '../../model/proxy-credentials.ts';
import type { Proxy, ProxyDocument, ProxySpec } from '../../model/proxy-resource.ts';
import { POOL_LABEL } from '../../model/pool-resource.ts';
import { INSTANCE_FINALIZER, ORPHAN_ANNOTATION } from '../../crds/resources.ts';
import { ProxyTerminatingError, type ApplyOutcome, type ProxyStore } from '../proxy-store.ts';
import { httpStatus, storeError } from './errors.ts';
import {
  deleteAndRead,
  modifyObject,
  releaseObject,
  replaceDesired,
  retryOnConflict,
  withFinalizer,
  writeStatus,
  MAX_ATTEMPTS,
  type ObjectRef,
} from './optimistic-writes.ts';
import {
  credentialsOfSecret,
  credentialsSecret,
  newProxyObject,
  ownedBy,
  secretName,
  toProxy,
  withOwner,
  type ProxyObject,
  type ResourceStatus,
} from './proxy-objects.ts';
import { ReadBackLog, type KubernetesStoreOptions, type ReadContext } from './read-back.ts';
import { ResourceClient, SecretClient } from './resource-client.ts';
import type { ProxyCredentials } from '../../model/proxy-credentials.ts';

const PROXY: ObjectRef = { kind: 'Proxy', noun: 'proxy' };

const never = new AbortController().signal;

function byName(a: Proxy, b: Proxy): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/**
 * Proxies as namespaced custom resources (`kubectl get px`), for `--store kubernetes`: the Proxy
 * objects are the desired state, whoever writes them (this store's `apply`, or `kubectl apply`).
 * Credentials live in a Secret per Proxy in the same namespace, owned by it (so Kubernetes removes
 * it with the Proxy) and named in `status.credentialsSecretRef`; listing proxies never reads one.
 *
 * - `apply` writes the Secret first, then the Proxy (with the finalizer `egress-proxies.io/instance`),
 *   then the Secret's ownerReference to the Proxy's uid, then the initial status.
 * - `requestDeletion` is a Kubernetes delete: the finalizer keeps the Proxy (Terminating) until
 *   reconcile has removed its instance and calls `remove`, which drops the finalizer. `--orphan` is
 *   the annotation `egress-proxies.io/orphan-instance: "true"`, set before the delete.
 * - Status is written only through the status subresource. Every write carries the resourceVersion
 *   it read; a 409 reads again, at most MAX_ATTEMPTS times.
 * - A Proxy made with `kubectl apply` has neither finalizer nor Secret: `credentials` (what reconcile
 *   reads before it makes an instance) adds the finalizer, then makes the Secret owned by the Proxy.
 */
export class KubernetesProxyStore implements ProxyStore {
  readonly #proxies: ResourceClient<ProxySpec, ResourceStatus>;
  readonly #secrets: SecretClient;
  readonly #now: () => Date;
  readonly #log: ReadBackLog;

  constructor(kc: KubeConfig, namespace: string, options: KubernetesStoreOptions = {}) {
    this.#proxies = new ResourceClient(kc, { plural: 'proxies', namespace });
    this.#secrets = new SecretClient(kc, namespace);
    this.#now = options.now ?? (() => new Date());
    this.#log = new ReadBackLog(options.logger);
  }

  /** Every object read back becomes a Proxy here: validated against the API's schemas and this clock (proxy-objects.ts). */
  #read(): (obj: ProxyObject) => Proxy {
    const ctx: ReadContext = { now: this.#now(), log: this.#log };
    return (obj) => toProxy(obj, ctx);
  }

  async get(name: string, signal: AbortSignal = never): Promise<Proxy | undefined> {
    const obj = await this.#proxies.get(name, signal);
    return obj && this.#read()(obj);
  }

  getMany(names: readonly string[], signal: AbortSignal = never): Promise<(Proxy | undefined)[]> {
    return Promise.all(names.map((n) => this.get(n, signal)));
  }

  async list(signal: AbortSignal = never): Promise<Proxy[]> {
    const { items } = await this.#proxies.list(signal);
    return items.map(this.#read()).sort(byName);
  }

  /**
   * The Proxies that belong to a pool (labelled `egress-proxies.io/pool`), from the API server's
   * watch cache: what the API's pick member cache polls, so each API replica does not read every
   * Proxy from etcd every `--pick-cache`.
   */
  async listPoolMembers(signal: AbortSignal = never): Promise<Proxy[]> {
    const { items } = await this.#proxies.list(signal, { labelSelector: POOL_LABEL, resourceVersion: '0' });
    return items.map(this.#read()).sort(byName);
  }

  /** The proxy's credentials; for a Proxy that has no Secret yet (made with kubectl), the Secret is made now. */
  async credentials(name: string, signal: AbortSignal = never): Promise<ProxyCredentials | undefined> {
    const found = credentialsOfSecret(await this.#secrets.get(secretName(name), signal));
    if (found) return found;
    const proxy = await this.#proxies.get(name, signal);
    if (!proxy || proxy.metadata.deletionTimestamp) return undefined;
    // Adopt a Proxy written with kubectl: the finalizer first (no instance may exist without it), then its Secret.
    await modifyObject(this.#proxies, PROXY, name, (obj) => withFinalizer(obj, INSTANCE_FINALIZER), signal, false);
    const secret = await this.#ensureSecret(name, signal);
    await this.#own(secret, proxy, signal);
    return credentialsOfSecret(secret);
  }

  credentialsOf(names: readonly string[], signal: AbortSignal = never): Promise<(ProxyCredentials | undefined)[]> {
    return Promise.all(names.map(async (n) => credentialsOfSecret(await this.#secrets.get(secretName(n), signal))));
  }

  async apply(doc: ProxyDocument, signal: AbortSignal = never): Promise<{ proxy: Proxy; outcome: ApplyOutcome }> {
    const name = doc.metadata.name;
    const spec = { ...doc.spec };
    const labels = { ...doc.metadata.labels };
    const existing = await this.#proxies.get(name, signal);
    if (existing?.metadata.deletionTimestamp) throw new ProxyTerminatingError(name);
    const secret = await this.#ensureSecret(name, signal);
    let first = true;
    return retryOnConflict(this.#proxies.what('applying', name), `Proxy "${name}"`, signal, async () => {
      const current = first ? existing : await this.#proxies.get(name, signal);
      first = false;
      if (!current) {
        const created = await this.#proxies.create(newProxyObject(name, spec, labels, INSTANCE_FINALIZER), signal);
        await this.#own(secret, created, signal);
        const withStatus = await this.#proxies.replaceStatus(
          { ...created, status: { phase: 'Pending', conditions: [], observedGeneration: 0, credentialsSecretRef: { name: secretName(name) } } },
          signal,
        );
        return { proxy: this.#read()(withStatus), outcome: 'created' };
      }
      if (current.metadata.deletionTimestamp) throw new ProxyTerminatingError(name);
      const updated = await replaceDesired(this.#proxies, current, { spec, labels }, INSTANCE_FINALIZER, signal);
      return updated ? { proxy: this.#read()(updated), outcome: 'configured' } : { proxy: this.#read()(current), outcome: 'unchanged' };
    });
  }

  async requestDeletion(name: string, options: { orphan?: boolean } = {}, signal: AbortSignal = never): Promise<Proxy> {
    if (options.orphan === true) {
      await modifyObject(
        this.#proxies,
        PROXY,
        name,
        (obj) =>
          obj.metadata.annotations?.[ORPHAN_ANNOTATION] === 'true'
            ? undefined
            : { ...obj, metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, [ORPHAN_ANNOTATION]: 'true' } } },
        signal,
      );
    }
    // Without our finalizer (a Proxy someone stripped of it) the delete is immediate: it reads as Terminating.
    return this.#read()(await deleteAndRead(this.#proxies, PROXY, name, signal));
  }

  async updateStatus(name: string, update: (current: Proxy) => Proxy['status'] | undefined, signal: AbortSignal = never): Promise<Proxy | undefined> {
    const written = await writeStatus(
      this.#proxies,
      PROXY,
      name,
      (obj) => {
        const status = update(this.#read()(obj));
        // The Secret's name is always this one: a reference read back is not trusted, it is written anew.
        return status && { ...status, credentialsSecretRef: { name: secretName(name) } };
      },
      signal,
    );
    return written && this.#read()(written);
  }

  /** Drops the finalizer (deleting the Proxy first if nobody had), so Kubernetes removes it; then its Secret. */
  async remove(name: string, signal: AbortSignal = never): Promise<void> {
    await releaseObject(this.#proxies, PROXY, name, INSTANCE_FINALIZER, signal);
    await this.#secrets.delete(secretName(name), signal);
  }

  /** Nothing to wait for: every write is awaited by its caller. */
  async close(): Promise<void> {}

  /** The Secret with the proxy's credentials, made now if there is none (two makers: the first wins). */
  async #ensureSecret(name: string, signal: AbortSignal): Promise<V1Secret> {
    const existing = await this.#secrets.get(secretName(name), signal);
    if (existing && credentialsOfSecret(existing)) return existing;
    try {
      return await this.#secrets.create(credentialsSecret(name, generateCredentials(name)), signal);
    } catch (err) {
      if (httpStatus(err) !== 409 || signal.aborted)
        throw storeError(err, `creating Secret "${secretName(name)}" in namespace "${this.#secrets.namespace}"`, signal);
      const winner = await this.#secrets.get(secretName(name), signal);
      if (!winner) throw storeError(err, `creating Secret "${secretName(name)}"`, signal);
      return winner;
    }
  }

  /** Makes the Proxy the Secret's owner (by uid), so that Kubernetes deletes the Secret with it. */
  async #own(secret: V1Secret, proxy: ProxyObject, signal: AbortSignal): Promise<void> {
    let current: V1Secret | undefined = secret;
    for (let attempt = 0; attempt < MAX_ATTEMPTS && current; attempt++) {
      if (ownedBy(current, proxy)) return;
      try {
        await this.#secrets.replace(withOwner(current, proxy), signal);
        return;
      } catch (err) {
        if ((err as { status?: number }).status !== 409 || signal.aborted) throw err;
        current = await this.#secrets.get(secretName(proxy.metadata.name), signal);
      }
    }
  }
}
