import { proxyEgressPolicy } from '../../egress/policy-config.ts';
import { observerErrors } from '../../http/connection-metrics.ts';
import { resourceCodeOf } from '../../observer-errors.ts';
import { NO_REDACTION } from '../../secrets/secret-registry.ts';
import { ProvisioningError } from '../lifecycle.ts';
import { exportDenials } from '../local/denied-metric.ts';
import { exportTraffic } from '../local/traffic-metric.ts';
import { createLocalLifecycle } from '../local/lifecycle.ts';
import type { Provider, ProviderDeps } from '../types.ts';
import { truncateMessage } from '../../health/message.ts';
import type { TargetResult } from '../../health/types.ts';
import { checkEndpoint } from './check.ts';
import { upstreamDataDir, type UpstreamProviderConfig } from './config.ts';
import { EndpointSource } from './endpoints.ts';
import { exportUpstreamMetrics } from './upstream-metrics.ts';

export { upstreamProviderSchema, type UpstreamProviderConfig } from './config.ts';

/** The target reported when the endpoint list itself cannot be read. */
const LIST_TARGET = 'endpoints';

/**
 * The upstream provider: proxies bought from vendors (or a static list), each endpoint a Proxy
 * `<provider>-<endpoint>` whose instance is a front in this machine's proxy host (the local
 * provider's host and lifecycle, in its own data directory) forwarding to the upstream. Crawlers
 * get the front's URL and credentials; the vendor's credentials stay in this process and the proxy
 * host (its control socket), registered with the secret registry.
 */
export function createUpstreamProvider(config: UpstreamProviderConfig, deps: ProviderDeps): Provider {
  const dataDir = upstreamDataDir(config, deps.dataDir);
  const secrets = deps.secrets ?? NO_REDACTION;
  const endpoints = new EndpointSource(config, { logger: deps.logger, secrets });
  const observer = observerErrors(deps.registry);
  const echo = deps.egress?.echo;
  const echoUrl = echo ? `http://${echo.host.includes(':') ? `[${echo.host}]` : echo.host}:${echo.port}${echo.path}` : undefined;
  const lifecycle = createLocalLifecycle({
    dataDir,
    logger: deps.logger,
    egressPolicy: proxyEgressPolicy(config.proxies?.egressPolicy, deps.egress),
    onObserverError: (err) => observer.inc({ where: 'exit-watch', code: resourceCodeOf(err) ?? 'unknown' }),
    upstreamOf: async (spec) => {
      const route = await endpoints.routeOf(spec.owner.proxy);
      if (!route) throw new ProvisioningError(`upstream provider "${config.name}" lists no endpoint for proxy "${spec.owner.proxy}"`);
      return { url: route.endpoint.url, hop: route.hop };
    },
  });
  lifecycle
    .writeEgressPolicy()
    .catch((err: unknown) => deps.logger.error({ err: (err as Error).message }, 'egress policy not written yet; retried at the next create'));
  const stopDenials = exportDenials(deps.registry, config.name, dataDir);
  const stopUpstream = exportUpstreamMetrics(deps.registry, config.name, dataDir);
  const stopTraffic = exportTraffic(deps.registry, config.name, dataDir, deps.proxyResolver);
  let known = config.endpoints.map((e) => e.name);
  let closed = false;
  return {
    name: config.name,
    type: 'upstream',
    lifecycle,
    targets: () => (known.length > 0 ? [...known] : [LIST_TARGET]),
    async check(signal) {
      const started = performance.now();
      /** The same failure on every target: the list itself could not be read, or the provider is closed. */
      const failed = (message: string): TargetResult[] =>
        [...(known.length > 0 ? known : [LIST_TARGET])].map((target) => ({
          target,
          ready: false,
          reason: signal.aborted ? ('Timeout' as const) : ('Error' as const),
          message: truncateMessage(secrets.redact(signal.aborted ? `the check deadline passed: ${message}` : message)),
          details: {},
          durationSeconds: (performance.now() - started) / 1000,
        }));
      if (closed) return failed('provider is closed');
      let list;
      try {
        list = await endpoints.current();
      } catch (err) {
        return failed((err as Error).message);
      }
      known = list.map((e) => e.name);
      if (list.length === 0) return failed('no endpoint is listed');
      return Promise.all(list.map((e) => checkEndpoint(e, { echoUrl, redactor: secrets }, signal)));
    },
    async declaredProxies() {
      return (await endpoints.current()).map((e) => ({ name: e.proxy, labels: e.labels }));
    },
    close: () => {
      closed = true;
      stopDenials();
      stopUpstream();
      stopTraffic();
      lifecycle.close();
      return Promise.resolve();
    },
  };
}
