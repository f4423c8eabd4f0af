import type { TrafficSource } from '../model/traffic.ts';
import type { ProviderConfig } from './config.ts';
import { localDataDir } from './local/config.ts';
import { CollectedTraffic } from './local/traffic-baseline.ts';
import { upstreamDataDir } from './upstream/config.ts';

/**
 * The traffic of the instances under `dataDir`, each read answering what grew since the one before;
 * `commit` keeps on disk what the usage store took (traffic-baseline.ts), so a restarted worker
 * does not store it again.
 */
export function dataDirTraffic(provider: string, dataDir: string): TrafficSource {
  const collected = new CollectedTraffic(dataDir);
  return { provider, read: () => collected.read(), commit: () => collected.commit() };
}

/**
 * The traffic sources of a configuration: its local and upstream providers (their proxies and fronts
 * are served on this machine, each instance under the provider's data directory). The proxies of
 * kvm, gcp and kubernetes providers are read through the proxies themselves
 * (src/proxies/remote-traffic.ts, docs/usage.md#traffic).
 * Each call makes new sources, which read from where they start (a collector's own).
 */
export function trafficSources(providers: readonly ProviderConfig[], rootDataDir: string): TrafficSource[] {
  const sources: TrafficSource[] = [];
  for (const p of providers) {
    if (p.type === 'local') sources.push(dataDirTraffic(p.name, localDataDir(p, rootDataDir)));
    else if (p.type === 'upstream') sources.push(dataDirTraffic(p.name, upstreamDataDir(p, rootDataDir)));
  }
  return sources;
}
