import { join } from 'node:path';
import { readdir } from 'node:fs/promises';
import type { ProxyEgressPolicy } from '../../egress/policy-config.ts';
import type { Logger } from '../../logging.ts';
import type { InstanceExit, ProxyLifecycle } from '../lifecycle.ts';
import { policyDocument } from '../policy-document.ts';
import { deleteLocalInstance } from './delete-instance.ts';
import { DeletionMarks } from './deletion-marks.ts';
import { describeInstance } from './describe-instance.ts';
import { ensureLocalInstance } from './ensure-instance.ts';
import { ExitWatch, observerWarning, type WatchedProxy } from './exit-watch.ts';
import { ProxyHostSupervisor } from './host-client.ts';
import { LocalInstanceError } from './instance-error.ts';
import { asIntent, egressPolicyPath, instanceDir, instancesDir, INTENT_FILE, readJson } from './instance-files.ts';
import { egressPolicyWriter, NAME_PATTERN, readState } from './instance-state.ts';
import type { LocalContext, UpstreamOf } from './lifecycle-context.ts';
import { NameLocks } from './name-locks.ts';
import { hostProgramInstaller } from './proxy-program.ts';
import { createSourceAddressPool } from './source-addresses.ts';
import { watchRunning } from './watch-running.ts';

export interface LocalLifecycleOptions {
  /** The provider's data directory; instances live under `<dataDir>/instances/<name>/`. */
  dataDir: string;
  logger: Logger;
  /** How long a SIGTERM'd proxy process of the earlier model gets before SIGKILL (default 5 s). */
  stopGraceMs?: number;
  /** The egress policy the proxies enforce (default: the default deny alone, nothing guarded). */
  egressPolicy?: ProxyEgressPolicy;
  /** How often the processes serving proxies are looked at for an exit (default 200 ms). */
  exitPollMs?: number;
  /** Addresses or CIDR blocks of this machine the proxies send from, one each (`sourceAddresses`, validated by the config schema). */
  sourceAddresses?: readonly string[];
  /** Relay processes the proxy host forks to use more cores (`proxies.relayProcesses`; default: the host's, one per core beyond the first). */
  relayProcesses?: number;
  /** `--traffic-domains` of a proxy host this lifecycle starts (traffic-stats.ts; absent: the host's default; 0: no accounting, for the data-plane bench). */
  trafficDomains?: number;
  /** A look at the proxies' processes this process could not make for want of its own resources (EMFILE…): counted, never an exit. */
  onObserverError?: (err: Error) => void;
  /** Makes every instance a front that forwards through the upstream proxy this names (the `upstream` provider). */
  upstreamOf?: UpstreamOf;
}

export interface LocalLifecycle extends ProxyLifecycle {
  /**
   * Writes the egress policy to `<dataDir>/egress-policy.json` when it differs from what is there
   * (atomically); the proxy host (and proxy processes of the earlier model) watch that file and apply it at once.
   * Done once per lifecycle, before the first proxy starts; a failed write is tried again next time.
   */
  writeEgressPolicy(): Promise<void>;
  /** Reports the exit of every proxy of the data directory, adopted ones included (see exit-watch.ts). */
  onInstanceExit(listener: (exit: InstanceExit) => void): () => void;
  /** Stops watching (the proxy host and its proxies keep running). */
  close(): void;
}

export { LocalInstanceError };

/**
 * Local proxies: one listener each on 127.0.0.1, all served by one detached proxy host per data
 * directory (proxy-host.ts), their state in files under the data directory, so that proxies
 * outlive the worker that started them and a new worker finds them (and the host) again.
 *
 * Migration: an instance still served by a per-instance proxy process of the earlier model
 * (its `instance.json` names a live one) is adopted as it is — described, watched, given new
 * credentials by SIGHUP, stopped by SIGTERM on deletion — until it exits or is deleted; a new
 * start of it goes to the host, on the same port. All of that model is legacy-proxies.ts; the
 * files of an instance are read and written by instance-state.ts. The paths: ensure-instance.ts,
 * delete-instance.ts, describe-instance.ts (reads), watch-running.ts (adoption when exits are watched).
 */
export function createLocalLifecycle(options: LocalLifecycleOptions): LocalLifecycle {
  const { dataDir, logger } = options;
  const stopGraceMs = options.stopGraceMs ?? 5000;
  const exits = new ExitWatch({ pollMs: options.exitPollMs, onObserverError: observerWarning(logger, options.onObserverError) });
  const writeEgressPolicy = egressPolicyWriter(dataDir, policyDocument(options.egressPolicy), logger);
  const program = hostProgramInstaller(dataDir, logger);
  const host = new ProxyHostSupervisor({
    dataDir,
    logger,
    program,
    policyFile: egressPolicyPath(dataDir),
    ...(options.relayProcesses !== undefined ? { relays: options.relayProcesses } : {}),
    ...(options.trafficDomains !== undefined ? { trafficDomains: options.trafficDomains } : {}),
    onChildExit: (pid) => exits.check(pid),
  });
  const ctx: LocalContext = {
    dataDir,
    logger,
    exits,
    host,
    addresses:
      options.sourceAddresses && options.sourceAddresses.length > 0
        ? createSourceAddressPool(dataDir, options.sourceAddresses, async (name) =>
            NAME_PATTERN.test(name) ? asIntent(await readJson(join(instanceDir(dataDir, name), INTENT_FILE)).catch(() => undefined))?.sourceAddress : undefined,
          )
        : undefined,
    deletions: new DeletionMarks(),
    writeEgressPolicy,
    ...(options.upstreamOf ? { upstreamOf: options.upstreamOf } : {}),
  };
  /** Serialises the calls on one name inside this process. */
  const locks = new NameLocks();

  let closed = false;
  /** A host that died is started again at once (it brings every proxy back on its port), whether or not a reconcile asks. */
  const restartHost = (_exit: InstanceExit, p: WatchedProxy): void => {
    if (closed || !p.exitMessage.startsWith('proxy host')) return;
    host.ensure(AbortSignal.timeout(30_000)).catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'could not restart the proxy host'));
  };

  return {
    writeEgressPolicy,
    close: () => {
      closed = true;
      exits.close();
    },
    onInstanceExit(listener) {
      const off = exits.subscribe((exit, p) => {
        restartHost(exit, p);
        listener(exit);
      });
      watchRunning(ctx).catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'could not list running local proxies to watch'));
      return off;
    },
    ensureInstance: (spec, signal) => locks.run(spec.name, () => ensureLocalInstance(ctx, spec, signal)),

    async getInstance(name, _placement, signal) {
      signal.throwIfAborted();
      if (!NAME_PATTERN.test(name)) return undefined;
      const dir = instanceDir(dataDir, name);
      const mark = ctx.deletions.mark(name);
      const { intent, record } = await readState(dir);
      return intent ? describeInstance(ctx, dir, intent, record, mark) : undefined;
    },

    deleteInstance: (name, _placement, target, signal) => locks.run(name, () => deleteLocalInstance(ctx, name, target, stopGraceMs, signal)),

    async *listInstances(fleet, signal) {
      let names: string[];
      try {
        const entries = await readdir(instancesDir(dataDir), { withFileTypes: true });
        names = entries.filter((e) => e.isDirectory()).map((e) => e.name);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw err;
      }
      for (const name of names.sort()) {
        signal.throwIfAborted();
        const dir = instanceDir(dataDir, name);
        const mark = ctx.deletions.mark(name);
        const { intent, record } = await readState(dir);
        if (intent?.owner.fleet !== fleet || intent.name !== name) continue;
        yield await describeInstance(ctx, dir, intent, record, mark);
      }
    },
  };
}
