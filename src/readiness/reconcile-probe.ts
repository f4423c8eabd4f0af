import type { ReadinessProbe } from '../proxies/readiness-contract.ts';
import type { ProxyCredentialsReader } from '../store/proxy-store.ts';
import { probeProxy } from './probe.ts';

/**
 * The readiness probe of reconcile and of the probe loop: a TCP connect, then an HTTP request
 * through the proxy, with its credentials, to the API's echo endpoint (which also tells the
 * proxy's egress IP). Each step has a deadline of its own (`--probe-timeout`): a proxy that
 * accepts connections and never answers is a failed probe (cause `timeout`), not a reconcile
 * that hangs until its job deadline.
 */
export function reconcileProbe(proxies: ProxyCredentialsReader, echoUrl: () => string, stepTimeoutMs = 2000): ReadinessProbe {
  return async (endpoint, proxy, signal, known) => {
    const credentials = known ?? (await proxies.credentials(proxy.name, signal));
    if (!credentials) return { ok: false, cause: 'error', message: 'no credentials stored for the proxy', durationSeconds: 0 };
    const result = await probeProxy({ endpoint, credentials, echoUrl: echoUrl(), signal, stepTimeoutMs });
    return result.ok
      ? { ok: true, egressIp: result.egressIp, durationSeconds: result.durationSeconds }
      : { ok: false, cause: result.cause, message: `${result.stage}: ${result.message}`, durationSeconds: result.durationSeconds };
  };
}
