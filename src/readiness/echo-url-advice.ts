import type { ProviderConfig } from '../providers/config.ts';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\])$/;

/**
 * Why the readiness probes' echo URL will not work, when that can be told from the
 * configuration: a proxy on a remote provider (kvm, kubernetes, gcp) sends the probe's request
 * from its own machine, where a loopback address is not this API. Undefined when it looks fine.
 */
export function echoUrlAdvice(providers: readonly ProviderConfig[], echoUrl: string): string | undefined {
  let host: string;
  try {
    host = new URL(echoUrl).hostname;
  } catch {
    return undefined;
  }
  if (!LOOPBACK.test(host)) return undefined;
  const remote = providers.filter((p) => p.type !== 'local' && 'proxies' in p && p.proxies !== undefined).map((p) => p.name);
  if (remote.length === 0) return undefined;
  return `readiness probes of proxies on ${remote.map((n) => `"${n}"`).join(', ')} request ${echoUrl} through each proxy, from the proxy's machine, where a loopback address is not this API: set --echo-url to an address of the API that those proxies can reach, or they will never become Ready`;
}
