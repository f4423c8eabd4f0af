/**
 * What the real cluster's controllers do, done by the fake right after the write that triggers it:
 * - namespaces: a Namespace object exists for every namespace the Pod store knows (defaults, seeded Pods);
 *   creating one makes it usable at once; deleting one removes it at once (no `Terminating` phase) with
 *   every generically stored object, Secret and Service in it (Pods are left);
 * - garbage collection (background propagation): when an object is really gone, the objects naming it in
 *   `ownerReferences` by uid are deleted (finalizers respected); a namespaced owner only owns objects of
 *   its own namespace. The real collector does this asynchronously, some time later.
 */
import type { ObjectStore } from './object-store.ts';
import type { ResourceEvent, ResourceStore, StoredObject } from './resource-store.ts';
import type { ResourceType } from './resource-types.ts';

/** Starts the namespace and garbage-collection controllers; returns `ensureNamespaces` for the router. */
export function runControllers(resources: ResourceStore, others: ObjectStore[]): () => void {
  const namespaces = resources.pods.namespaces;
  const nsType = resources.find('', 'v1', 'namespaces')!;

  const namespaceGone = (ns: string): void => {
    namespaces.delete(ns);
    for (const t of resources.types.values()) {
      if (!t.namespaced) continue;
      for (const o of resources.list(t, ns)) resources.delete(t, ns, o.metadata.name);
    }
    for (const objects of others) for (const o of objects.list(ns)) objects.delete(ns, o.metadata.name);
  };

  const collectGarbage = (owner: StoredObject): void => {
    const ownedBy = (o: { metadata: Record<string, unknown> }): boolean =>
      Array.isArray(o.metadata.ownerReferences) && o.metadata.ownerReferences.some((r: { uid?: string }) => r.uid === owner.metadata.uid);
    const sameScope = (ns: string | undefined): boolean => owner.metadata.namespace === undefined || owner.metadata.namespace === ns;
    for (const t of resources.types.values()) {
      for (const o of resources.list(t)) {
        // An earlier deletion in this pass may have taken it already.
        if (ownedBy(o) && sameScope(o.metadata.namespace) && resources.get(t, o.metadata.namespace, o.metadata.name)) {
          resources.delete(t, o.metadata.namespace, o.metadata.name);
        }
      }
    }
    for (const objects of others) {
      for (const o of objects.list()) if (ownedBy(o) && sameScope(o.metadata.namespace)) objects.delete(o.metadata.namespace, o.metadata.name);
    }
  };

  resources.on('change', (ev: ResourceEvent) => {
    if (ev.resource === '/namespaces' && ev.type === 'ADDED') namespaces.add(ev.object.metadata.name);
  });
  resources.on('gone', (t: ResourceType, o: StoredObject) => {
    if (t.group === '' && t.plural === 'namespaces') namespaceGone(o.metadata.name);
    collectGarbage(o);
  });

  return () => {
    for (const name of [...namespaces]) {
      if (!resources.get(nsType, undefined, name)) resources.create(nsType, undefined, 'v1', { metadata: { name } });
    }
  };
}
