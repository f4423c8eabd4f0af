/**
 * How the orchestrator marks the Compute Engine instances it manages. The health check lists with this
 * filter, and so will the GC sweep: one constant, so that the two cannot drift apart.
 */
export const MANAGED_LABEL_KEY = 'managed-by';
export const MANAGED_LABEL_VALUE = 'egress-proxies';

export const MANAGED_LABELS = Object.freeze({ [MANAGED_LABEL_KEY]: MANAGED_LABEL_VALUE } as Record<string, string>);

/** `labels.managed-by = "egress-proxies"`: the Compute list filter for every managed instance. */
export const MANAGED_FILTER = `labels.${MANAGED_LABEL_KEY} = "${MANAGED_LABEL_VALUE}"`;
