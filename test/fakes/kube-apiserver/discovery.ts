/**
 * Legacy (unaggregated) discovery: `/api`, `/api/v1`, `/apis` (APIGroupList), `/apis/{group}/{version}`
 * (APIResourceList) and `/version`, built from the fixed core kinds and every type the generic store serves
 * (built-ins and registered CRDs, with their `/status` subresources). kubectl 1.32 falls back to these when
 * the aggregated form is not offered.
 */
import type { ResourceStore } from './resource-store.ts';
import { groupVersion, type ResourceType } from './resource-types.ts';

const POD_VERBS = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];

/** Kinds with stores of their own (pod-store.ts, object-store.ts). */
const CORE_FIXED = [
  { name: 'pods', singularName: 'pod', namespaced: true, kind: 'Pod', verbs: POD_VERBS, shortNames: ['po'], categories: ['all'] },
  { name: 'pods/status', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get', 'patch', 'update'] },
  { name: 'secrets', singularName: 'secret', namespaced: true, kind: 'Secret', verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'] },
  {
    name: 'services',
    singularName: 'service',
    namespaced: true,
    kind: 'Service',
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    shortNames: ['svc'],
    categories: ['all'],
  },
  { name: 'services/status', singularName: '', namespaced: true, kind: 'Service', verbs: ['get'] },
];

function resourcesOf(t: ResourceType): Record<string, unknown>[] {
  const main = {
    name: t.plural,
    singularName: t.singular,
    namespaced: t.namespaced,
    kind: t.kind,
    verbs: t.verbs,
    ...(t.shortNames?.length ? { shortNames: t.shortNames } : {}),
    ...(t.categories?.length ? { categories: t.categories } : {}),
  };
  if (!t.statusSubresource) return [main];
  return [main, { name: `${t.plural}/status`, singularName: '', namespaced: t.namespaced, kind: t.kind, verbs: ['get', 'patch', 'update'] }];
}

/** Groups and their versions, in registration order, plus authorization.k8s.io (SelfSubjectAccessReview). */
function groups(store: ResourceStore): Map<string, string[]> {
  const out = new Map<string, string[]>([['authorization.k8s.io', ['v1']]]);
  for (const t of store.types.values()) {
    if (!t.group) continue;
    const versions = out.get(t.group) ?? [];
    for (const v of t.versions) if (!versions.includes(v)) versions.push(v);
    out.set(t.group, versions);
  }
  return out;
}

/** A discovery document for a GET of `parts`, or undefined when the path is not a discovery path. */
export function discovery(store: ResourceStore, parts: string[], method: string): [number, unknown] | undefined {
  if (method !== 'GET') return undefined;
  const path = parts.join('/');
  if (path === 'api')
    return [200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1:0' }] }];
  if (path === 'version') return [200, { major: '1', minor: '34', gitVersion: 'v1.34.0-fake', platform: 'linux/amd64' }];
  if (path === 'api/v1') {
    const generic = [...store.types.values()].filter((t) => t.group === '').flatMap(resourcesOf);
    const resources = [...CORE_FIXED, ...generic].sort((a, b) => String(a.name).localeCompare(String(b.name)));
    return [200, { kind: 'APIResourceList', groupVersion: 'v1', resources }];
  }
  if (path === 'apis') {
    const list = [...groups(store).entries()].map(([name, versions]) => ({
      name,
      versions: versions.map((v) => ({ groupVersion: groupVersion(name, v), version: v })),
      preferredVersion: { groupVersion: groupVersion(name, versions[0]!), version: versions[0]! },
    }));
    return [200, { kind: 'APIGroupList', apiVersion: 'v1', groups: list }];
  }
  if (parts[0] === 'apis' && parts.length === 2) {
    const versions = groups(store).get(parts[1]!);
    if (!versions) return undefined;
    return [
      200,
      {
        kind: 'APIGroup',
        apiVersion: 'v1',
        name: parts[1],
        versions: versions.map((v) => ({ groupVersion: groupVersion(parts[1]!, v), version: v })),
        preferredVersion: { groupVersion: groupVersion(parts[1]!, versions[0]!), version: versions[0]! },
      },
    ];
  }
  if (parts[0] === 'apis' && parts.length === 3) {
    const [, group, version] = parts as [string, string, string];
    const gv = groupVersion(group, version);
    if (group === 'authorization.k8s.io' && version === 'v1') {
      return [
        200,
        {
          kind: 'APIResourceList',
          apiVersion: 'v1',
          groupVersion: gv,
          resources: [
            {
              name: 'selfsubjectaccessreviews',
              singularName: 'selfsubjectaccessreview',
              namespaced: false,
              kind: 'SelfSubjectAccessReview',
              verbs: ['create'],
            },
          ],
        },
      ];
    }
    const types = [...store.types.values()].filter((t) => t.group === group && t.versions.includes(version));
    if (types.length === 0) return undefined;
    return [200, { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: gv, resources: types.flatMap(resourcesOf) }];
  }
  return undefined;
}
