export { statusMessage, statusReason } from '../../clients/kubernetes/status.ts';
export { createKubernetesProvider, KUBERNETES_TARGET, type KubernetesProviderOptions } from './provider.ts';
export { MANAGED_LABELS, MANAGED_LABEL_SELECTOR } from './labels.ts';
export { buildKubeConfig, apiHost, contextNamespace, type KubeConnectionConfig } from '../../clients/kubernetes/kubeconfig.ts';
export { raceAbort, withSignal } from '../../clients/kubernetes/request-options.ts';
export { classifyKubeError, truncateMessage, MAX_MESSAGE, type Classified } from './classify.ts';
export { kubernetesProviderSchema, type KubernetesProviderConfig } from './config.ts';
