/**
 * The kinds the install uses from other projects, as their operators would register them: the
 * Prometheus Operator's ServiceMonitor and KEDA's ScaledObject and TriggerAuthentication. The fake's
 * minimal CRDs leave the objects open; their own schemas are checked by kubernetes-models.
 */
import { minimalCrd } from '../fakes/kube-apiserver/test-crds.ts';

export const THIRD_PARTY_CRDS: readonly object[] = [
  minimalCrd('monitoring.coreos.com', 'ServiceMonitor', 'servicemonitors'),
  minimalCrd('keda.sh', 'ScaledObject', 'scaledobjects', 'v1alpha1'),
  minimalCrd('keda.sh', 'TriggerAuthentication', 'triggerauthentications', 'v1alpha1'),
];
