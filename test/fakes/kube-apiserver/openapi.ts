/**
 * A minimal OpenAPI v3 discovery: `/openapi/v3` lists one document per group-version, and each document
 * (`/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`) holds a PATCH operation per kind carrying
 * `x-kubernetes-group-version-kind` and the `fieldValidation` query parameter. That is what kubectl 1.32
 * looks for to validate server-side (`fieldValidation=Strict`) instead of downloading schemas: no schemas
 * are served (deviation), and kubectl's client-side apply then builds JSON merge patches for custom
 * resources and strategic merge patches from its compiled-in types for the built-ins.
 */
import type { ResourceStore } from './resource-store.ts';
import type { ResourceType } from './resource-types.ts';

const CORE_KINDS = [
  { plural: 'pods', kind: 'Pod' },
  { plural: 'secrets', kind: 'Secret' },
  { plural: 'services', kind: 'Service' },
];

function groupVersions(store: ResourceStore): Map<string, { group: string; version: string; kinds: { plural: string; kind: string; namespaced: boolean }[] }> {
  const out = new Map<string, { group: string; version: string; kinds: { plural: string; kind: string; namespaced: boolean }[] }>();
  out.set('api/v1', { group: '', version: 'v1', kinds: CORE_KINDS.map((k) => ({ ...k, namespaced: true })) });
  const add = (t: ResourceType, version: string): void => {
    const key = t.group ? `apis/${t.group}/${version}` : `api/${version}`;
    const entry = out.get(key) ?? { group: t.group, version, kinds: [] };
    entry.kinds.push({ plural: t.plural, kind: t.kind, namespaced: t.namespaced });
    out.set(key, entry);
  };
  for (const t of store.types.values()) for (const v of t.versions) add(t, v);
  return out;
}

/** `/openapi/v3[/…]` documents, or undefined for another path. */
export function openApiV3(store: ResourceStore, parts: string[], method: string): [number, unknown] | undefined {
  if (method !== 'GET' || parts[0] !== 'openapi' || parts[1] !== 'v3') return undefined;
  const gvs = groupVersions(store);
  if (parts.length === 2) {
    const paths = Object.fromEntries([...gvs.keys()].map((k) => [k, { serverRelativeURL: `/openapi/v3/${k}?hash=${store.pods.resourceVersion()}` }]));
    return [200, { paths }];
  }
  const gv = gvs.get(parts.slice(2).join('/'));
  if (!gv) return undefined;
  const prefix = gv.group ? `/apis/${gv.group}/${gv.version}` : `/api/${gv.version}`;
  const paths = Object.fromEntries(
    gv.kinds.map((k) => [
      `${prefix}${k.namespaced ? '/namespaces/{namespace}' : ''}/${k.plural}/{name}`,
      {
        patch: {
          'x-kubernetes-group-version-kind': { group: gv.group, version: gv.version, kind: k.kind },
          parameters: [{ name: 'fieldValidation', in: 'query', schema: { type: 'string', uniqueItems: true } }],
          responses: {},
        },
      },
    ]),
  );
  return [200, { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.34.0-fake' }, paths, components: { schemas: {} } }];
}
