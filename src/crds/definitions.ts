import { structuralSchema, type OpenApiSchema } from './openapi.ts';
import {
  API_GROUP,
  API_VERSION,
  poolResourceNameSchema,
  poolResourceSpecSchema,
  poolResourceStatusSchema,
  providerHealthResourceStatusSchema,
  proxyResourceNameSchema,
  proxyResourceSpecSchema,
  proxyResourceStatusSchema,
} from './resources.ts';

/** The CustomResourceDefinitions, generated from the zod schemas (`npm run crds` writes them). */

interface PrinterColumn {
  name: string;
  type: 'string' | 'boolean' | 'date' | 'integer' | 'number';
  jsonPath: string;
  priority?: number;
  description?: string;
}

interface CrdInput {
  kind: string;
  plural: string;
  singular: string;
  shortName: string;
  scope: 'Cluster' | 'Namespaced';
  properties: Record<string, OpenApiSchema>;
  required?: string[];
  columns: PrinterColumn[];
}

export type CustomResourceDefinition = Record<string, unknown>;

const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

function crd(input: CrdInput): CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${input.plural}.${API_GROUP}` },
    spec: {
      group: API_GROUP,
      names: {
        kind: input.kind,
        listKind: `${input.kind}List`,
        plural: input.plural,
        singular: input.singular,
        shortNames: [input.shortName],
      },
      scope: input.scope,
      versions: [
        {
          name: API_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: input.columns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                ...input.properties,
              },
              ...(input.required ? { required: input.required } : {}),
            },
          },
        },
      ],
    },
  };
}

export function providerHealthCrd(): CustomResourceDefinition {
  return crd({
    kind: 'ProviderHealth',
    plural: 'providerhealths',
    singular: 'providerhealth',
    shortName: 'ph',
    scope: 'Cluster',
    properties: {
      metadata: { type: 'object' },
      status: { description: 'Written by the publisher only, through the status subresource.', ...structuralSchema(providerHealthResourceStatusSchema) },
    },
    columns: [
      { name: 'Ready', type: 'boolean', jsonPath: '.status.ready' },
      { name: 'Targets', type: 'string', jsonPath: '.status.targetsReady', description: 'Ready targets over all targets' },
      { name: 'Last Check', type: 'date', jsonPath: '.status.lastCheckTime' },
      AGE,
      { name: 'Since', type: 'date', jsonPath: '.status.lastTransitionTime', priority: 1 },
    ],
  });
}

export function proxyCrd(): CustomResourceDefinition {
  return crd({
    kind: 'Proxy',
    plural: 'proxies',
    singular: 'proxy',
    shortName: 'px',
    scope: 'Namespaced',
    properties: {
      metadata: { type: 'object', properties: { name: structuralSchema(proxyResourceNameSchema) } },
      spec: structuralSchema(proxyResourceSpecSchema),
      status: { description: 'Written by reconcile only, through the status subresource.', ...structuralSchema(proxyResourceStatusSchema) },
    },
    required: ['spec'],
    columns: [
      { name: 'Provider', type: 'string', jsonPath: '.spec.provider' },
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      AGE,
      { name: 'Placement', type: 'string', jsonPath: '.spec.placement', priority: 1 },
      { name: 'URL', type: 'string', jsonPath: '.status.url', priority: 1 },
    ],
  });
}

/**
 * A duration's syntax as `parseDuration` reads it (src/schema/duration.ts), without a sign or a bare 0.
 * zod's refine (a duration of at least 10s) has no JSON Schema form: the CRD checks the syntax, the API the minimum.
 */
const POSITIVE_DURATION = '^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$';

function poolSpecSchema(): OpenApiSchema {
  const spec = structuralSchema(poolResourceSpecSchema);
  const maxAge = (spec.properties as Record<string, OpenApiSchema> | undefined)?.maxAge;
  if (!maxAge || maxAge.type !== 'string') throw new Error('spec.maxAge: expected a string in the ProxyPool schema');
  maxAge.pattern = POSITIVE_DURATION;
  // The autoscaler's durations: their syntax here, their minimums in the API.
  const autoscale = (spec.properties as Record<string, OpenApiSchema>).autoscale?.properties as Record<string, OpenApiSchema> | undefined;
  for (const field of ['idleAfter', 'scaleDownDelay']) {
    const node = autoscale?.[field];
    if (!node || node.type !== 'string') throw new Error(`spec.autoscale.${field}: expected a string in the ProxyPool schema`);
    node.pattern = field === 'scaleDownDelay' ? '^(0|([0-9]+(\\.[0-9]+)?(ms|s|m|h))+)$' : POSITIVE_DURATION;
  }
  return spec;
}

export function proxyPoolCrd(): CustomResourceDefinition {
  return crd({
    kind: 'ProxyPool',
    plural: 'proxypools',
    singular: 'proxypool',
    shortName: 'pxp',
    scope: 'Namespaced',
    properties: {
      metadata: { type: 'object', properties: { name: structuralSchema(poolResourceNameSchema) } },
      spec: poolSpecSchema(),
      status: { description: 'Written by the pool reconcile only, through the status subresource.', ...structuralSchema(poolResourceStatusSchema) },
    },
    required: ['spec'],
    columns: [
      // The spec's count beside the reconcile's (they differ under autoscale, and before the first pass).
      { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas' },
      { name: 'Desired', type: 'integer', jsonPath: '.status.desired' },
      { name: 'Ready', type: 'integer', jsonPath: '.status.ready' },
      { name: 'Rotating', type: 'integer', jsonPath: '.status.rotating' },
      { name: 'Failed', type: 'integer', jsonPath: '.status.failed' },
      AGE,
      { name: 'Current', type: 'integer', jsonPath: '.status.current', priority: 1 },
      { name: 'Provider', type: 'string', jsonPath: '.spec.template.spec.provider', priority: 1 },
      { name: 'Max Age', type: 'string', jsonPath: '.spec.maxAge', priority: 1 },
    ],
  });
}

/** Where each generated CRD is kept in the repository (deploy/kubernetes references these paths). */
export const CRD_FILES: readonly { path: string; build: () => CustomResourceDefinition }[] = [
  { path: 'deploy/kubernetes/crds/providerhealths.egress-proxies.io.yaml', build: providerHealthCrd },
  { path: 'deploy/kubernetes/crds/proxies.egress-proxies.io.yaml', build: proxyCrd },
  { path: 'deploy/kubernetes/crds/proxypools.egress-proxies.io.yaml', build: proxyPoolCrd },
];
