export { createGcpProvider, GCP_TARGET, type GcpProviderOptions } from './provider.ts';
export { MANAGED_FILTER, MANAGED_LABELS, MANAGED_LABEL_KEY, MANAGED_LABEL_VALUE } from './labels.ts';
export {
  computeClientOptions,
  computeEndpoint,
  createComputeClients,
  tokenFileAuthClient,
  type ComputeClients,
  type ComputeConnectionConfig,
} from './clients.ts';
export { aggregatedListFirstPage, countInstances, type AggregatedPage, type FirstPageRequest } from './first-page.ts';
export { apiaryError, classifyComputeError, httpStatus, isGaxiosError, transportCode, truncateMessage, MAX_MESSAGE, type Classified } from './classify.ts';
export { gcpProviderSchema, type GcpProviderConfig } from './config.ts';
