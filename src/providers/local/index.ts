import { proxyEgressPolicy } from '../../egress/policy-config.ts';
import type { Provider, ProviderDeps } from '../types.ts';
import { checkLocal, LOCAL_TARGET } from './check.ts';
import { exportDenials } from './denied-metric.ts';
import { exportTraffic } from './traffic-metric.ts';
import { createLocalLifecycle } from './lifecycle.ts';
import { localDataDir, type LocalProviderConfig } from './config.ts';
import { observerErrors } from '../../http/connection-metrics.ts';
import { resourceCodeOf } from '../../observer-errors.ts';

export { localProviderSchema, type LocalProviderConfig } from './config.ts';

/** The local provider: forward proxies served by one proxy host process on this machine, state under its data directory. */
export function createLocalProvider(config: LocalProviderConfig, deps: ProviderDeps): Provider {
  const dataDir = localDataDir(config, deps.dataDir);
  const egressPolicy = proxyEgressPolicy(config.proxies?.egressPolicy, deps.egress);
  const sourceAddresses = config.proxies?.sourceAddresses;
  const relayProcesses = config.proxies?.relayProcesses;
  const observer = observerErrors(deps.registry);
  const lifecycle = createLocalLifecycle({
    dataDir,
    logger: deps.logger,
    egressPolicy,
    ...(sourceAddresses ? { sourceAddresses } : {}),
    ...(relayProcesses !== undefined ? { relayProcesses } : {}),
    onObserverError: (err) => observer.inc({ where: 'exit-watch', code: resourceCodeOf(err) ?? 'unknown' }),
  });
  // At once, not on the first reconcile: proxies adopted from an earlier worker run (whose private
  // Redis port may have changed) pick the new policy up from the file they watch.
  lifecycle
    .writeEgressPolicy()
    .catch((err: unknown) => deps.logger.error({ err: (err as Error).message }, 'egress policy not written yet; retried at the next create'));
  const stopDenials = exportDenials(deps.registry, config.name, dataDir);
  const stopTraffic = exportTraffic(deps.registry, config.name, dataDir, deps.proxyResolver);
  let closed = false;
  return {
    name: config.name,
    type: 'local',
    lifecycle,
    targets: () => [LOCAL_TARGET],
    check: (signal) =>
      closed
        ? Promise.resolve([{ target: LOCAL_TARGET, ready: false, reason: 'Error', message: 'provider is closed', details: { dataDir }, durationSeconds: 0 }])
        : checkLocal(dataDir, signal),
    close: () => {
      closed = true;
      stopDenials();
      stopTraffic();
      lifecycle.close();
      return Promise.resolve();
    },
  };
}
