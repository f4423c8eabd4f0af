/**
 * Minimal CustomResourceDefinitions for the kinds the install uses from other projects: the
 * Prometheus Operator's ServiceMonitor and KEDA's ScaledObject and TriggerAuthentication. A cluster
 * has the real ones once those operators are installed; a test registers these first so that the
 * rendered install applies. Their spec is left open (`x-kubernetes-preserve-unknown-fields`): the
 * objects' own schemas are checked by kubernetes-models, not here.
 */
function openCrd(group: string, kind: string, plural: string): object {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [
        {
          name: group === 'keda.sh' ? 'v1alpha1' : 'v1',
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              },
            },
          },
        },
      ],
    },
  };
}

export const THIRD_PARTY_CRDS: readonly object[] = [
  openCrd('monitoring.coreos.com', 'ServiceMonitor', 'servicemonitors'),
  openCrd('keda.sh', 'ScaledObject', 'scaledobjects'),
  openCrd('keda.sh', 'TriggerAuthentication', 'triggerauthentications'),
];
