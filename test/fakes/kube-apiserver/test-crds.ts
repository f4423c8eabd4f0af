/**
 * Small CRDs of the fake's own tests: `Widget` (namespaced, short name `wd`, status subresource, printer
 * columns, a list-map, defaults, enums, formats) and `Gadget` (cluster-scoped, short name `gd`, no status
 * subresource). The project's real CRDs are generated elsewhere (deploy/kubernetes/crds/).
 */
export const GROUP = 'example.com';

export function widgetCrd(): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `widgets.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget', shortNames: ['wd'], categories: ['all'] },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: 'Size', type: 'integer', jsonPath: '.spec.size' },
            { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
            { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          ],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: {
                  type: 'object',
                  required: ['color'],
                  properties: {
                    color: { type: 'string', enum: ['red', 'blue'] },
                    size: { type: 'integer', minimum: 1, maximum: 10, default: 1 },
                    label: { type: 'string', minLength: 2, maxLength: 8, pattern: '^[a-z]+$' },
                    since: { type: 'string', format: 'date-time' },
                    ports: { type: 'array', maxItems: 2, items: { type: 'integer' } },
                    parts: {
                      type: 'array',
                      'x-kubernetes-list-type': 'map',
                      'x-kubernetes-list-map-keys': ['name'],
                      items: { type: 'object', required: ['name'], properties: { name: { type: 'string' }, weight: { type: 'integer' } } },
                    },
                    tags: { type: 'object', additionalProperties: { type: 'string' } },
                    note: { type: 'string', nullable: true },
                    extra: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                  },
                },
                status: {
                  type: 'object',
                  properties: {
                    observedGeneration: { type: 'integer' },
                    message: { type: 'string', maxLength: 16 },
                    conditions: {
                      type: 'array',
                      'x-kubernetes-list-type': 'map',
                      'x-kubernetes-list-map-keys': ['type'],
                      items: {
                        type: 'object',
                        required: ['type', 'status'],
                        properties: {
                          type: { type: 'string' },
                          status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
                          lastTransitionTime: { type: 'string', format: 'date-time' },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
}

export function gadgetCrd(): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `gadgets.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Cluster',
      names: { plural: 'gadgets', kind: 'Gadget', shortNames: ['gd'] },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: { type: 'object', properties: { level: { type: 'integer' } } },
                status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              },
            },
          },
        },
      ],
    },
  };
}

/**
 * A minimal CRD for a third-party kind the install applies (ServiceMonitor, KEDA ScaledObject): any spec
 * and status kept as given (`x-kubernetes-preserve-unknown-fields`).
 */
export function minimalCrd(
  group: string,
  kind: string,
  plural: string,
  version = 'v1',
  scope: 'Namespaced' | 'Cluster' = 'Namespaced',
): Record<string, unknown> {
  const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope,
      names: { plural, kind },
      versions: [{ name: version, served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: open, status: open } } } }],
    },
  };
}
