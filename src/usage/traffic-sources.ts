import type { ProviderConfig } from '../providers/config.ts';
import { localDataDir } from '../providers/local/config.ts';
import { upstreamDataDir } from '../providers/upstream/config.ts';

/** A provider whose proxies keep their traffic counts under a data directory on this machine. */
export interface TrafficSource {
  provider: string;
  dataDir: string;
}

/**
 * The traffic sources of a configuration: its local and upstream providers (their proxies and fronts
 * are served on this machine, each instance under the provider's data directory). The proxies of
 * kvm, gcp and kubernetes providers keep no counts this process can read (docs/usage.md#traffic).
 */
export function trafficSources(providers: readonly ProviderConfig[], rootDataDir: string): TrafficSource[] {
  const sources: TrafficSource[] = [];
  for (const p of providers) {
    if (p.type === 'local') sources.push({ provider: p.name, dataDir: localDataDir(p, rootDataDir) });
    else if (p.type === 'upstream') sources.push({ provider: p.name, dataDir: upstreamDataDir(p, rootDataDir) });
  }
  return sources;
}
