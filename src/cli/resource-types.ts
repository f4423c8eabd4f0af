/** The resource types of `egress get`, as its usage errors list them. */
export const GET_TYPES = 'providerhealth (ph), proxies (proxy), pools (pool)';

/** The names `egress delete` and `egress rotate` accept for a ProxyPool. */
export const POOL_TYPES: readonly string[] = ['pool', 'pools', 'proxypool', 'proxypools'];
