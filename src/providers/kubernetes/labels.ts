/**
 * How the orchestrator marks the Pods it manages. The health check lists with this selector, and so will
 * the lifecycle and GC work: one constant, so that the check and the sweep cannot drift apart.
 */
export const MANAGED_LABELS = Object.freeze({
  app: 'egress-proxy',
  'managed-by': 'egress-proxies',
} as const);

/** `app=egress-proxy,managed-by=egress-proxies`: the label selector for every managed Pod. */
export const MANAGED_LABEL_SELECTOR = Object.entries(MANAGED_LABELS)
  .map(([k, v]) => `${k}=${v}`)
  .join(',');
