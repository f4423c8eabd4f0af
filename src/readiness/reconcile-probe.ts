import type { ReadinessProbe } from '../proxies/reconcile.ts';
import type { ProxyStore } from '../store/proxy-store.ts';
import { probeProxy } from './probe.ts';

/**
 * The readiness probe reconcile runs before calling a proxy Ready: a TCP connect, then an HTTP
 * request through the proxy, with its credentials, to the API's echo endpoint (which also
 * tells the proxy's egress IP).
 */
export function reconcileProbe(proxies: ProxyStore, echoUrl: () => string, timeoutMs = 10_000): ReadinessProbe {
  return async (endpoint, proxy, signal) => {
    const credentials = await proxies.credentials(proxy.name, signal);
    if (!credentials) return { ok: false, message: 'no credentials stored for the proxy' };
    // A probe has a deadline of its own: a proxy that accepts connections and never answers is a
    // failed probe (counted by the hysteresis), not a reconcile that hangs until its job deadline.
    const own = AbortSignal.timeout(timeoutMs);
    try {
      const result = await probeProxy({ endpoint, credentials, echoUrl: echoUrl(), signal: AbortSignal.any([signal, own]) });
      return result.ok ? { ok: true, egressIp: result.egressIp } : { ok: false, message: `${result.stage}: ${result.message}` };
    } catch (err) {
      if (own.aborted && !signal.aborted) return { ok: false, message: `timeout: no answer through the proxy within ${timeoutMs} ms` };
      throw err;
    }
  };
}
