/** What the paths of the local lifecycle share: the data directory, the proxy host, the exit watch and the deletions begun. */
import type { ChainHop } from '../../forward-proxy/chain-hop.ts';
import type { Logger } from '../../logging.ts';
import type { InstanceSpec } from '../lifecycle.ts';
import type { DeletionMarks } from './deletion-marks.ts';
import type { ExitWatch, WatchedProxy } from './exit-watch.ts';
import type { ProxyHostSupervisor } from './host-client.ts';
import type { SourceAddressPool } from './source-addresses.ts';

export interface LocalContext {
  /** The provider's data directory; instances live under `<dataDir>/instances/<name>/`. */
  dataDir: string;
  logger: Logger;
  exits: ExitWatch;
  /** The detached proxy host serving the proxies of the data directory. */
  host: ProxyHostSupervisor;
  /** The machine's addresses the proxies send from, when configured. */
  addresses: SourceAddressPool | undefined;
  deletions: DeletionMarks;
  /** Writes the egress policy file when it changed (once per lifecycle; instance-state.ts). */
  writeEgressPolicy(): Promise<void>;
  /** The upstream proxy an instance forwards through (an `upstream` provider's fronts); absent for plain local proxies. */
  upstreamOf?: UpstreamOf;
}

/** Where a front forwards: `url` (`scheme://host:port`, no credentials) is recorded in its intent, `hop` goes over the control socket only. */
export interface UpstreamRoute {
  url: string;
  hop: ChainHop;
}

/** The route of an instance, read at each ensure (a rotated vendor password applies at once); throws when the instance has none any more. */
export type UpstreamOf = (spec: InstanceSpec, signal: AbortSignal) => Promise<UpstreamRoute>;

/** Watches `proxy` unless a deletion of its name began since `mark` was read. */
export function watchUnlessDeleted(ctx: LocalContext, proxy: WatchedProxy, mark: number | undefined): void {
  if (ctx.deletions.unchanged(proxy.name, mark)) ctx.exits.watch(proxy);
}
