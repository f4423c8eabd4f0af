import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { withSignal } from '../../clients/kubernetes/request-options.ts';
import { API_GROUP, API_VERSION } from '../../crds/resources.ts';
import { PageBound } from '../../clients/page-bound.ts';
import { httpStatus, malformedList, storeError } from './errors.ts';

/** The metadata the stores read and write; the rest of an object's metadata passes through untouched. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean; blockOwnerDeletion?: boolean }[];
}

export interface CustomObject<Spec = unknown, Status = unknown> {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec?: Spec;
  status?: Status;
}

interface ResourceRef {
  plural: string;
  /** Undefined for a cluster-scoped resource. */
  namespace: string | undefined;
}

/**
 * The calls the Kubernetes stores make, on one resource of our API group: get (undefined when absent),
 * list, create, replace (PUT with the object's resourceVersion: 409 when someone wrote in between),
 * replace of `/status`, delete. Every call takes the caller's signal; failures are KubernetesStoreError.
 */
export class ResourceClient<Spec, Status> {
  readonly #api: CustomObjectsApi;
  readonly #ref: ResourceRef;

  constructor(kc: KubeConfig, ref: ResourceRef) {
    this.#api = kc.makeApiClient(CustomObjectsApi);
    this.#ref = ref;
  }

  #params(): { group: string; version: string; plural: string } {
    return { group: API_GROUP, version: API_VERSION, plural: this.#ref.plural };
  }

  #what(verb: string, name?: string): string {
    return `${verb} ${this.#ref.plural}${name === undefined ? '' : ` "${name}"`}${this.#ref.namespace ? ` in namespace "${this.#ref.namespace}"` : ''}`;
  }

  async get(name: string, signal: AbortSignal): Promise<CustomObject<Spec, Status> | undefined> {
    signal.throwIfAborted();
    try {
      const ns = this.#ref.namespace;
      return (await (ns
        ? this.#api.getNamespacedCustomObject({ ...this.#params(), namespace: ns, name }, withSignal(signal))
        : this.#api.getClusterCustomObject({ ...this.#params(), name }, withSignal(signal)))) as CustomObject<Spec, Status>;
    } catch (err) {
      if (httpStatus(err) === 404 && !signal.aborted) return undefined;
      throw storeError(err, this.#what('reading', name), signal);
    }
  }

  /**
   * Every object (those `query.labelSelector` selects) and the list's resourceVersion (where a
   * watch starts). `query.resourceVersion: '0'` lets the server answer from its watch cache, for
   * readers that poll and may be a moment behind.
   *
   * The list is complete and well-formed or it is an error: an answer without an `items` array is
   * refused (GC reads "no Proxy" as "delete its instance"), a `continue` token is followed (the
   * server may page any list), and a token that repeats, or more pages than PageBound allows, fails
   * the listing (ListingPagesError) instead of looping for ever.
   */
  async list(
    signal: AbortSignal,
    query: { labelSelector?: string; resourceVersion?: string } = {},
  ): Promise<{ items: CustomObject<Spec, Status>[]; resourceVersion: string }> {
    signal.throwIfAborted();
    const items: CustomObject<Spec, Status>[] = [];
    const pages = new PageBound(this.#what('listing'));
    let token: string | undefined;
    let resourceVersion = '';
    for (;;) {
      const list = await this.#listPage(signal, token === undefined ? query : { ...query, _continue: token });
      if (!Array.isArray(list.items)) throw malformedList(this.#what('listing'), 'the answer has no items list');
      items.push(...(list.items as CustomObject<Spec, Status>[]));
      resourceVersion = list.metadata?.resourceVersion ?? resourceVersion;
      const next = list.metadata?.continue;
      if (next !== undefined && typeof next !== 'string') throw malformedList(this.#what('listing'), 'the continue token is not a string');
      token = pages.next(next);
      if (token === undefined) return { items, resourceVersion };
    }
  }

  async #listPage(
    signal: AbortSignal,
    query: { labelSelector?: string; resourceVersion?: string; _continue?: string },
  ): Promise<{ items?: unknown; metadata?: { resourceVersion?: string; continue?: unknown } }> {
    try {
      const ns = this.#ref.namespace;
      const list = (await (ns
        ? this.#api.listNamespacedCustomObject({ ...this.#params(), ...query, namespace: ns }, withSignal(signal))
        : this.#api.listClusterCustomObject({ ...this.#params(), ...query }, withSignal(signal)))) as {
        items?: CustomObject<Spec, Status>[];
        metadata?: { resourceVersion?: string; continue?: unknown };
      } | null;
      if (typeof list !== 'object' || list === null) return {};
      return list;
    } catch (err) {
      throw storeError(err, this.#what('listing'), signal);
    }
  }

  async create(body: CustomObject<Spec, Status>, signal: AbortSignal): Promise<CustomObject<Spec, Status>> {
    signal.throwIfAborted();
    const ns = this.#ref.namespace;
    return (await (ns
      ? this.#api.createNamespacedCustomObject({ ...this.#params(), namespace: ns, body }, withSignal(signal))
      : this.#api.createClusterCustomObject({ ...this.#params(), body }, withSignal(signal)))) as CustomObject<Spec, Status>;
  }

  /** PUT of the object (its spec, labels, annotations, finalizers): 409 when `body.metadata.resourceVersion` is stale. */
  async replace(body: CustomObject<Spec, Status>, signal: AbortSignal): Promise<CustomObject<Spec, Status>> {
    signal.throwIfAborted();
    const ns = this.#ref.namespace;
    const name = body.metadata.name;
    return (await (ns
      ? this.#api.replaceNamespacedCustomObject({ ...this.#params(), namespace: ns, name, body }, withSignal(signal))
      : this.#api.replaceClusterCustomObject({ ...this.#params(), name, body }, withSignal(signal)))) as CustomObject<Spec, Status>;
  }

  /** PUT of `/status` (only the status is taken): 409 when `body.metadata.resourceVersion` is stale. */
  async replaceStatus(body: CustomObject<Spec, Status>, signal: AbortSignal): Promise<CustomObject<Spec, Status>> {
    signal.throwIfAborted();
    const ns = this.#ref.namespace;
    const name = body.metadata.name;
    return (await (ns
      ? this.#api.replaceNamespacedCustomObjectStatus({ ...this.#params(), namespace: ns, name, body }, withSignal(signal))
      : this.#api.replaceClusterCustomObjectStatus({ ...this.#params(), name, body }, withSignal(signal)))) as CustomObject<Spec, Status>;
  }

  /** Deletes the object (a finalizer keeps it, Terminating); false when it was already gone. */
  async delete(name: string, signal: AbortSignal): Promise<boolean> {
    signal.throwIfAborted();
    try {
      const ns = this.#ref.namespace;
      await (ns
        ? this.#api.deleteNamespacedCustomObject({ ...this.#params(), namespace: ns, name }, withSignal(signal))
        : this.#api.deleteClusterCustomObject({ ...this.#params(), name }, withSignal(signal)));
      return true;
    } catch (err) {
      if (httpStatus(err) === 404 && !signal.aborted) return false;
      throw storeError(err, this.#what('deleting', name), signal);
    }
  }

  what(verb: string, name?: string): string {
    return this.#what(verb, name);
  }
}

/** The Secrets that hold proxies' credentials, in one namespace. */
export class SecretClient {
  readonly #api: CoreV1Api;
  readonly namespace: string;

  constructor(kc: KubeConfig, namespace: string) {
    this.#api = kc.makeApiClient(CoreV1Api);
    this.namespace = namespace;
  }

  async get(name: string, signal: AbortSignal): Promise<V1Secret | undefined> {
    signal.throwIfAborted();
    try {
      return await this.#api.readNamespacedSecret({ name, namespace: this.namespace }, withSignal(signal));
    } catch (err) {
      if (httpStatus(err) === 404 && !signal.aborted) return undefined;
      throw storeError(err, `reading Secret "${name}" in namespace "${this.namespace}"`, signal);
    }
  }

  async create(body: V1Secret, signal: AbortSignal): Promise<V1Secret> {
    signal.throwIfAborted();
    return this.#api.createNamespacedSecret({ namespace: this.namespace, body }, withSignal(signal));
  }

  async replace(body: V1Secret, signal: AbortSignal): Promise<V1Secret> {
    signal.throwIfAborted();
    const name = body.metadata?.name ?? '';
    try {
      return await this.#api.replaceNamespacedSecret({ name, namespace: this.namespace, body }, withSignal(signal));
    } catch (err) {
      throw storeError(err, `updating Secret "${name}" in namespace "${this.namespace}"`, signal);
    }
  }

  async delete(name: string, signal: AbortSignal): Promise<boolean> {
    signal.throwIfAborted();
    try {
      await this.#api.deleteNamespacedSecret({ name, namespace: this.namespace }, withSignal(signal));
      return true;
    } catch (err) {
      if (httpStatus(err) === 404 && !signal.aborted) return false;
      throw storeError(err, `deleting Secret "${name}" in namespace "${this.namespace}"`, signal);
    }
  }
}
