import { mkdir, readdir, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { proxyEgressPolicy, type ProxyEgressPolicy } from '../../egress/policy-config.ts';
import { observerFailure } from '../../observer-errors.ts';
import type { Logger } from '../../logging.ts';
import {
  ForeignInstanceError,
  foreignOwner,
  ProvisioningError,
  type DeleteTarget,
  type Instance,
  type InstanceExit,
  type InstanceSpec,
  type ProxyLifecycle,
} from '../lifecycle.ts';
import {
  egressPolicyPath,
  instanceDir,
  instancesDir,
  INTENT_FILE,
  asInstance,
  asIntent,
  DELETING_FILE,
  readJson,
  writeFileAtomic,
  type InstanceRecord,
  type IntentRecord,
} from './instance-files.ts';
import { ExitWatch, observerWarning, type WatchedProxy } from './exit-watch.ts';
import { ProxyHostSupervisor } from './host-client.ts';
import { LocalInstanceError } from './instance-error.ts';
import { egressPolicyWriter, failure, hostedWatched, hostInstanceId, NAME_PATTERN, readState, recordIntent, sameOwner } from './instance-state.ts';
import { legacyAlive, legacyInstanceId, legacyProcesses, legacyProcessFor, legacyWatched, reloadLegacyCredentials, stopLegacy } from './legacy-proxies.ts';
import { NameLocks } from './name-locks.ts';
import { isHostProcess } from './process-table.ts';
import { hostProgramInstaller } from './proxy-program.ts';
import { createSourceAddressPool, type SourceAddressPool } from './source-addresses.ts';

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
  /** A look at the proxies' processes this process could not make for want of its own resources (EMFILE…): counted, never an exit. */
  onObserverError?: (err: Error) => void;
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
 * files of an instance are read and written by instance-state.ts.
 */
export function createLocalLifecycle(options: LocalLifecycleOptions): LocalLifecycle {
  const { dataDir, logger } = options;
  const stopGraceMs = options.stopGraceMs ?? 5000;
  const exits = new ExitWatch({ pollMs: options.exitPollMs, onObserverError: observerWarning(logger, options.onObserverError) });
  const writeEgressPolicy = egressPolicyWriter(dataDir, options.egressPolicy ?? proxyEgressPolicy(undefined, undefined), logger);
  const program = hostProgramInstaller(dataDir, logger);
  const host = new ProxyHostSupervisor({
    dataDir,
    logger,
    program,
    policyFile: egressPolicyPath(dataDir),
    ...(options.relayProcesses !== undefined ? { relays: options.relayProcesses } : {}),
    onChildExit: (pid) => exits.check(pid),
  });
  const addresses: SourceAddressPool | undefined =
    options.sourceAddresses && options.sourceAddresses.length > 0
      ? createSourceAddressPool(dataDir, options.sourceAddresses, async (name) =>
          NAME_PATTERN.test(name) ? asIntent(await readJson(join(instanceDir(dataDir, name), INTENT_FILE)).catch(() => undefined))?.sourceAddress : undefined,
        )
      : undefined;

  /**
   * Deletions begun per name: a look at an instance that started before a deletion of it (a
   * listing, a describe) must not watch it again once the deletion unwatched it.
   */
  const removals = new Map<string, number>();
  /** Serialises the calls on one name inside this process. */
  const locks = new NameLocks();

  /** Watches `proxy` unless a deletion of its name began since `removal` was read. */
  function watch(proxy: WatchedProxy, removal: number | undefined): void {
    if (removals.get(proxy.name) === removal) exits.watch(proxy);
  }

  async function describe(
    dir: string,
    intent: IntentRecord,
    record: InstanceRecord | undefined,
    removal: number | undefined,
    hostPid?: number,
  ): Promise<Instance> {
    const base = {
      name: intent.name,
      owner: intent.owner,
      createdAt: intent.createdAt,
      ...(intent.placement === undefined ? {} : { placement: intent.placement }),
    };
    if (record?.host === true && (hostPid === record.pid || (await isHostProcess(record.pid, dataDir)))) {
      // Every running proxy we describe is watched, so one adopted from an earlier worker is too.
      watch(hostedWatched(dataDir, intent, record), removal);
      return { ...base, id: hostInstanceId(record), state: 'running', endpoint: { host: '127.0.0.1', port: record.port } };
    }
    if (await legacyAlive(dir, record)) {
      watch(legacyWatched(dir, intent.name, intent.owner, record!), removal);
      return { ...base, id: legacyInstanceId(record!), state: 'running', endpoint: { host: '127.0.0.1', port: record!.port } };
    }
    const starting = await legacyProcessFor(dir);
    if (starting !== undefined) return { ...base, id: String(starting), state: 'provisioning' };
    // Out of descriptors here says nothing about the proxy: the look fails (retried), it is not "failed".
    const running = await host.running(AbortSignal.timeout(5000)).catch((err: unknown) => {
      if (observerFailure('the proxy host', err)) throw err;
      return undefined;
    });
    if (running && record) {
      // The host that served it is gone and a new one runs: it brings the proxy back (or the next ensure asks it to).
      return { ...base, id: '', state: 'provisioning', message: `proxy host ${record.pid} is no longer running; host ${running.pid} restarts the proxy` };
    }
    const { id, message } = await failure(dataDir, dir, intent, record);
    return { ...base, id, state: 'failed', message };
  }

  async function ensure(spec: InstanceSpec, signal: AbortSignal): Promise<Instance> {
    if (!NAME_PATTERN.test(spec.name)) {
      throw new ProvisioningError(`instance name "${spec.name}" must be lower case letters, digits and "-", at most 63 characters`);
    }
    const dir = instanceDir(dataDir, spec.name);
    const log = logger.child({ instance: spec.name, proxy: spec.owner.proxy });
    const removal = removals.get(spec.name);
    signal.throwIfAborted();
    await writeEgressPolicy();
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const state = await readState(dir);
    if (state.intent && !sameOwner(state.intent, spec)) {
      throw new ProvisioningError(
        `instance "${spec.name}" belongs to ${state.intent.owner.fleet}/${state.intent.owner.proxy}, not ${spec.owner.fleet}/${spec.owner.proxy}`,
      );
    }
    // A deletion that did not finish (its worker died): the name is wanted again.
    await rm(join(dir, DELETING_FILE), { force: true });
    const { intent, credentialsChanged } = await recordIntent(dir, spec, state.intent, addresses, signal, log);
    if (await legacyAlive(dir, state.record)) {
      if (credentialsChanged) reloadLegacyCredentials(state.record!, log);
      return describe(dir, intent, state.record, removal);
    }
    // The host starts the proxy (on its previous port when free) or re-reads its credentials.
    const answer = await host.call('PUT', `/proxies/${spec.name}`, true, signal);
    const served = asInstance(answer?.body);
    if (answer?.status !== 200 || !served) {
      const error = (answer?.body as { error?: unknown } | undefined)?.error;
      throw new LocalInstanceError(
        `the proxy host could not start "${spec.name}": ${typeof error === 'string' ? error : `status ${answer?.status ?? 'none'}`}`,
      );
    }
    return describe(dir, intent, served, removal, served.pid);
  }

  async function remove(name: string, target: DeleteTarget, signal: AbortSignal): Promise<void> {
    if (!NAME_PATTERN.test(name)) return;
    const dir = instanceDir(dataDir, name);
    const { intent, record } = await readState(dir);
    const foreign = intent ? foreignOwner(intent.owner, target.owner) : undefined;
    if (foreign) {
      logger.warn({ instance: name, reason: foreign }, 'local instance is not ours; not deleting it');
      throw new ForeignInstanceError(name, `local instance: ${foreign}`);
    }
    const pids = await legacyProcesses(dir, record);
    if (!intent && !record && pids.size === 0) {
      // No intent recorded: not an instance of ours. Only an empty directory (a create that died
      // right after making it) is removed; anything else there is left as it is.
      await rmdir(dir).catch(() => undefined);
      return;
    }
    // A deletion is not an exit to report; a host restarting meanwhile does not bring it back.
    removals.set(name, (removals.get(name) ?? 0) + 1);
    exits.unwatch(name);
    await writeFileAtomic(join(dir, DELETING_FILE), `${new Date().toISOString()}\n`);
    await stopLegacy(name, dir, pids, signal, stopGraceMs);
    // Returns once the host closed the listener (no host running: nothing listens).
    const answer = await host.call('DELETE', `/proxies/${name}`, false, signal);
    if (answer && answer.status !== 200) throw new LocalInstanceError(`the proxy host could not stop "${name}": status ${answer.status}`);
    await rm(dir, { recursive: true, force: true });
    await addresses?.release(name, intent?.sourceAddress);
    logger.info({ instance: name, port: record?.port, pids: [...pids] }, 'local instance deleted');
  }

  /**
   * Watches every proxy already running under the data directory (adopted from an earlier worker),
   * and reports those recorded but no longer running (their host died while no worker watched).
   */
  async function watchRunning(): Promise<void> {
    let names: string[];
    try {
      names = (await readdir(instancesDir(dataDir), { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
    } catch {
      return;
    }
    const hostAlive = new Map<number, boolean>();
    for (const name of names) {
      const dir = instanceDir(dataDir, name);
      const removal = removals.get(name);
      const { intent, record } = await readState(dir);
      if (!intent || !record) continue;
      if (record.host === true) {
        const live = hostAlive.get(record.pid) ?? (await isHostProcess(record.pid, dataDir));
        hostAlive.set(record.pid, live);
        if (live) watch(hostedWatched(dataDir, intent, record), removal);
        // Reported, not watched: no restart of the host from here (the next ensure starts one).
        else if (removals.get(name) === removal)
          exits.report(
            { name, owner: intent.owner, id: hostInstanceId(record), pid: record.pid, isOurs: () => Promise.resolve(false), exitMessage: '' },
            `proxy host ${record.pid} is no longer running`,
          );
        continue;
      }
      const watched = legacyWatched(dir, name, intent.owner, record);
      if (await legacyAlive(dir, record)) {
        if (removals.get(name) === removal) exits.watch(watched);
      } else if ((await legacyProcessFor(dir)) === undefined && removals.get(name) === removal) {
        exits.report(watched, `proxy process ${record.pid} is no longer running`);
      }
    }
  }

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
      watchRunning().catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'could not list running local proxies to watch'));
      return off;
    },
    ensureInstance: (spec, signal) => locks.run(spec.name, () => ensure(spec, signal)),

    async getInstance(name, _placement, signal) {
      signal.throwIfAborted();
      if (!NAME_PATTERN.test(name)) return undefined;
      const dir = instanceDir(dataDir, name);
      const removal = removals.get(name);
      const { intent, record } = await readState(dir);
      return intent ? describe(dir, intent, record, removal) : undefined;
    },

    deleteInstance: (name, _placement, target, signal) => locks.run(name, () => remove(name, target, signal)),

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
        const removal = removals.get(name);
        const { intent, record } = await readState(dir);
        if (intent?.owner.fleet !== fleet || intent.name !== name) continue;
        yield await describe(dir, intent, record, removal);
      }
    },
  };
}
