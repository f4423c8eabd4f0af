export { createKubernetesProvider, KUBERNETES_TARGET, type KubernetesProviderOptions } from './provider.ts';
export { MANAGED_LABELS, MANAGED_LABEL_SELECTOR } from './labels.ts';
export { buildKubeConfig, apiHost, contextNamespace, type KubeConnectionConfig } from './kubeconfig.ts';
export { raceAbort, withSignal } from './request-options.ts';
export { classifyKubeError, statusMessage, statusReason, truncateMessage, MAX_MESSAGE, type Classified } from './classify.ts';
export { kubernetesProviderSchema, type KubernetesProviderConfig } from './config.ts';
