/**
 * The kubernetes lifecycle's inventory of a fleet: its Pods, and the Secrets whose Pod is gone, paged
 * through cluster-wide or in each of the provider's namespaces.
 */
import type { CoreV1Api, V1ObjectMeta, V1Pod, V1Secret } from '@kubernetes/client-node';
import { PageBound } from '../../clients/page-bound.ts';
import { withSignal } from '../../clients/kubernetes/request-options.ts';
import type { Instance } from '../lifecycle.ts';
import { leftoverInstance } from './instance-view.ts';
import type { ObjectCalls } from './lifecycle-calls.ts';
import { MANAGED_LABEL_SELECTOR } from './labels.ts';
import { FLEET_LABEL, isManagedObject } from './lifecycle-owner.ts';
import { fleetSelector, podToInstance } from './lifecycle-pod.ts';

export interface InventoryDeps {
  api: CoreV1Api;
  call: ObjectCalls['call'];
  /** The provider's namespaces, listed one by one; undefined: cluster-wide. */
  namespaces: readonly string[] | undefined;
  pageSize: number;
  maxPages: number;
  port: number;
}

type ListPage<T> = (namespace: string | undefined, page: { limit: number; _continue?: string }) => Promise<{ items: T[]; metadata?: { _continue?: string } }>;

/** Every page of a list, cluster-wide or in each allowed namespace. */
async function* pages<T>(deps: InventoryDeps, what: string, signal: AbortSignal, list: ListPage<T>): AsyncGenerator<T> {
  for (const namespace of deps.namespaces ?? [undefined]) {
    const where = namespace ? `${what} in namespace "${namespace}"` : what;
    const bound = new PageBound(where, deps.maxPages);
    let token: string | undefined;
    do {
      const page = await deps.call(where, signal, () => list(namespace, { limit: deps.pageSize, ...(token ? { _continue: token } : {}) }));
      yield* page.items;
      token = bound.next(page.metadata?._continue);
    } while (token);
  }
}

export async function* fleetInstances(deps: InventoryDeps, fleet: string, signal: AbortSignal): AsyncGenerator<Instance> {
  const { api } = deps;
  const labelSelector = fleetSelector(MANAGED_LABEL_SELECTOR, fleet);
  const ours = (o: { metadata?: V1ObjectMeta }): boolean => isManagedObject(o) && o.metadata?.labels?.[FLEET_LABEL] === fleet;
  const key = (o: { metadata?: V1ObjectMeta }): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
  const pods = new Set<string>();
  const podPages = pages<V1Pod>(deps, 'listing proxy Pods', signal, (namespace, page) =>
    namespace
      ? api.listNamespacedPod({ namespace, labelSelector, ...page }, withSignal(signal))
      : api.listPodForAllNamespaces({ labelSelector, ...page }, withSignal(signal)),
  );
  for await (const pod of podPages) {
    // The server filtered already; checking again costs nothing and guards the "never touch" rule.
    if (!ours(pod)) continue;
    pods.add(key(pod));
    yield podToInstance(pod, deps.port);
  }
  // A Secret whose Pod is gone (a crash between the two creates, a deletion cut short) is an instance
  // too, so that the sweep deletes it once no proxy owns it and it is past the grace period.
  const secretPages = pages<V1Secret>(deps, 'listing proxy Secrets', signal, (namespace, page) =>
    namespace
      ? api.listNamespacedSecret({ namespace, labelSelector, ...page }, withSignal(signal))
      : api.listSecretForAllNamespaces({ labelSelector, ...page }, withSignal(signal)),
  );
  for await (const secret of secretPages) if (ours(secret) && !pods.has(key(secret))) yield leftoverInstance('Secret', secret);
}
