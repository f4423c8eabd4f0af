import { isDeepStrictEqual } from 'node:util';
import type { KubeConfig, V1Secret } from '@kubernetes/client-node';
import { NotFoundError } from '../../errors.ts';
import type { ProxyCredentials } from '../../providers/lifecycle.ts';
import { generateCredentials } from '../../model/proxy-credentials.ts';
import type { Proxy, ProxyDocument, ProxySpec } from '../../model/proxy-resource.ts';
import { INSTANCE_FINALIZER, ORPHAN_ANNOTATION } from '../../crds/resources.ts';
import { ProxyTerminatingError, type ApplyOutcome, type ProxyStore } from '../proxy-store.ts';
import { KubernetesConflictError, httpStatus, storeError } from './errors.ts';
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
import { ResourceClient, SecretClient } from './resource-client.ts';

/** Optimistic writes of one object that lose to another writer (409) are read and tried again this often at most. */
const MAX_ATTEMPTS = 10;

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

  constructor(kc: KubeConfig, namespace: string) {
    this.#proxies = new ResourceClient(kc, { plural: 'proxies', namespace });
    this.#secrets = new SecretClient(kc, namespace);
  }

  async get(name: string, signal: AbortSignal = never): Promise<Proxy | undefined> {
    const obj = await this.#proxies.get(name, signal);
    return obj && toProxy(obj);
  }

  getMany(names: readonly string[], signal: AbortSignal = never): Promise<(Proxy | undefined)[]> {
    return Promise.all(names.map((n) => this.get(n, signal)));
  }

  async list(signal: AbortSignal = never): Promise<Proxy[]> {
    const { items } = await this.#proxies.list(signal);
    return items.map(toProxy).sort(byName);
  }

  /** The proxy's credentials; for a Proxy that has no Secret yet (made with kubectl), the Secret is made now. */
  async credentials(name: string, signal: AbortSignal = never): Promise<ProxyCredentials | undefined> {
    const found = credentialsOfSecret(await this.#secrets.get(secretName(name), signal));
    if (found) return found;
    const proxy = await this.#proxies.get(name, signal);
    if (!proxy || proxy.metadata.deletionTimestamp) return undefined;
    // Adopt a Proxy written with kubectl: the finalizer first (no instance may exist without it), then its Secret.
    await this.#modify(
      name,
      (obj) =>
        obj.metadata.deletionTimestamp || obj.metadata.finalizers?.includes(INSTANCE_FINALIZER)
          ? undefined
          : { ...obj, metadata: { ...obj.metadata, finalizers: [...(obj.metadata.finalizers ?? []), INSTANCE_FINALIZER] } },
      signal,
      false,
    );
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
    let lastConflict: unknown;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = attempt === 0 ? existing : await this.#proxies.get(name, signal);
      try {
        if (!current) {
          const created = await this.#proxies.create(newProxyObject(name, spec, labels, INSTANCE_FINALIZER), signal);
          await this.#own(secret, created, signal);
          const withStatus = await this.#proxies.replaceStatus(
            { ...created, status: { phase: 'Pending', conditions: [], observedGeneration: 0, credentialsSecretRef: { name: secretName(name) } } },
            signal,
          );
          return { proxy: toProxy(withStatus), outcome: 'created' };
        }
        if (current.metadata.deletionTimestamp) throw new ProxyTerminatingError(name);
        if (isDeepStrictEqual(current.spec, spec) && isDeepStrictEqual(current.metadata.labels ?? {}, labels)) {
          return { proxy: toProxy(current), outcome: 'unchanged' };
        }
        const finalizers = current.metadata.finalizers ?? [];
        const updated = await this.#proxies.replace(
          {
            ...current,
            metadata: { ...current.metadata, labels, finalizers: finalizers.includes(INSTANCE_FINALIZER) ? finalizers : [...finalizers, INSTANCE_FINALIZER] },
            spec,
          },
          signal,
        );
        return { proxy: toProxy(updated), outcome: 'configured' };
      } catch (err) {
        if (httpStatus(err) !== 409 || signal.aborted) throw storeError(err, this.#proxies.what('applying', name), signal);
        lastConflict = err;
      }
    }
    throw new KubernetesConflictError(`Proxy "${name}"`, MAX_ATTEMPTS, { cause: lastConflict });
  }

  async requestDeletion(name: string, options: { orphan?: boolean } = {}, signal: AbortSignal = never): Promise<Proxy> {
    if (options.orphan === true) {
      await this.#modify(
        name,
        (obj) =>
          obj.metadata.annotations?.[ORPHAN_ANNOTATION] === 'true'
            ? undefined
            : { ...obj, metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, [ORPHAN_ANNOTATION]: 'true' } } },
        signal,
      );
    }
    const current = await this.#proxies.get(name, signal);
    if (!current) throw new NotFoundError('proxy', name);
    if (!current.metadata.deletionTimestamp) await this.#proxies.delete(name, signal);
    // Without our finalizer (a Proxy someone stripped of it) the delete was immediate: report it as Terminating.
    const after = await this.#proxies.get(name, signal);
    return toProxy(after ?? { ...current, metadata: { ...current.metadata, deletionTimestamp: new Date().toISOString() } });
  }

  async updateStatus(name: string, update: (current: Proxy) => Proxy['status'] | undefined, signal: AbortSignal = never): Promise<Proxy | undefined> {
    let lastConflict: unknown;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const obj = await this.#proxies.get(name, signal);
      if (!obj) return undefined;
      const current = toProxy(obj);
      const status = update(current);
      if (!status) return current;
      try {
        const ref = obj.status?.credentialsSecretRef ?? { name: secretName(name) };
        return toProxy(await this.#proxies.replaceStatus({ ...obj, status: { ...status, credentialsSecretRef: ref } }, signal));
      } catch (err) {
        if (httpStatus(err) === 404 && !signal.aborted) return undefined;
        if (httpStatus(err) !== 409 || signal.aborted) throw storeError(err, this.#proxies.what('writing the status of', name), signal);
        lastConflict = err;
      }
    }
    throw new KubernetesConflictError(`the status of Proxy "${name}"`, MAX_ATTEMPTS, { cause: lastConflict });
  }

  /** Drops the finalizer (deleting the Proxy first if nobody had), so Kubernetes removes it; then its Secret. */
  async remove(name: string, signal: AbortSignal = never): Promise<void> {
    const obj = await this.#proxies.get(name, signal);
    if (obj && !obj.metadata.deletionTimestamp) await this.#proxies.delete(name, signal);
    await this.#modify(
      name,
      (current) =>
        current.metadata.finalizers?.includes(INSTANCE_FINALIZER)
          ? { ...current, metadata: { ...current.metadata, finalizers: current.metadata.finalizers.filter((f) => f !== INSTANCE_FINALIZER) } }
          : undefined,
      signal,
      false,
    );
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

  /** Read-modify-write of the Proxy object (not its status); `change` returning undefined writes nothing. */
  async #modify(name: string, change: (obj: ProxyObject) => ProxyObject | undefined, signal: AbortSignal, mustExist = true): Promise<void> {
    let lastConflict: unknown;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const obj = await this.#proxies.get(name, signal);
      if (!obj) {
        if (mustExist) throw new NotFoundError('proxy', name);
        return;
      }
      const next = change(obj);
      if (!next) return;
      try {
        await this.#proxies.replace(next, signal);
        return;
      } catch (err) {
        if (httpStatus(err) === 404 && !mustExist && !signal.aborted) return;
        if (httpStatus(err) !== 409 || signal.aborted) throw storeError(err, this.#proxies.what('updating', name), signal);
        lastConflict = err;
      }
    }
    throw new KubernetesConflictError(`Proxy "${name}"`, MAX_ATTEMPTS, { cause: lastConflict });
  }
}
