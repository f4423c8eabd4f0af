/** What the paths of the local lifecycle share: the data directory, the proxy host, the exit watch and the deletions begun. */
import type { Logger } from '../../logging.ts';
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
}

/** Watches `proxy` unless a deletion of its name began since `mark` was read. */
export function watchUnlessDeleted(ctx: LocalContext, proxy: WatchedProxy, mark: number | undefined): void {
  if (ctx.deletions.unchanged(proxy.name, mark)) ctx.exits.watch(proxy);
}
