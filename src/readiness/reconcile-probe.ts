import type { ReadinessProbe } from '../proxies/reconcile.ts';
import type { ProxyStore } from '../store/proxy-store.ts';
import { probeProxy } from './probe.ts';

/**
 * The readiness probe reconcile runs before calling a proxy Ready: a TCP connect, then an HTTP
 * request through the proxy, with its credentials, to the API's echo endpoint (which also
 * tells the proxy's egress IP).
 */
export function reconcileProbe(proxies: ProxyStore, echoUrl: () => string): ReadinessProbe {
  return async (endpoint, proxy, signal) => {
    const credentials = await proxies.credentials(proxy.name, signal);
    if (!credentials) return { ok: false, message: 'no credentials stored for the proxy' };
    const result = await probeProxy({ endpoint, credentials, echoUrl: echoUrl(), signal });
    return result.ok ? { ok: true, egressIp: result.egressIp } : { ok: false, message: `${result.stage}: ${result.message}` };
  };
}
