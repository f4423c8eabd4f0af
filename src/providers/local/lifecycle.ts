import { mkdir, readdir, readFile, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { proxyEgressPolicy, type ProxyEgressPolicy } from '../../egress/policy-config.ts';
import { EgressError } from '../../errors.ts';
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
  asCredentials,
  asInstance,
  asIntent,
  CREDENTIALS_FILE,
  DELETING_FILE,
  egressPolicyPath,
  HOST_LOG,
  hostDir,
  INSTANCE_FILE,
  instanceDir,
  instancesDir,
  INTENT_FILE,
  LOG_FILE,
  logTail,
  readJson,
  writeFileAtomic,
  writeJsonAtomic,
  type InstanceRecord,
  type IntentRecord,
} from './instance-files.ts';
import { ExitWatch, observerWarning, type WatchedProxy } from './exit-watch.ts';
import { ProxyHostSupervisor } from './host-client.ts';
import { findProxyProcesses, isHostProcess, isProxyProcess, sendSignal, waitUntilGone } from './process-table.ts';
import { NameLocks } from './name-locks.ts';
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

/** A local instance could not be started or stopped; retrying may help. */
export class LocalInstanceError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_LOCAL_INSTANCE', message, { ...options, retryable: true });
  }
}

const NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

function sameOwner(a: IntentRecord, b: InstanceSpec): boolean {
  return a.owner.fleet === b.owner.fleet && a.owner.proxy === b.owner.proxy;
}

/** An instance's id: the serving host's pid and the proxy's port (a restarted host or a re-created proxy is a new instance). */
function hostInstanceId(record: InstanceRecord): string {
  return `${record.pid}:${record.port}`;
}

/**
 * Local proxies: one listener each on 127.0.0.1, all served by one detached proxy host per data
 * directory (proxy-host.ts), their state in files under the data directory, so that proxies
 * outlive the worker that started them and a new worker finds them (and the host) again.
 *
 * Migration: an instance still served by a per-instance proxy process of the earlier model
 * (its `instance.json` names a live one) is adopted as it is — described, watched, given new
 * credentials by SIGHUP, stopped by SIGTERM on deletion — until it exits or is deleted; a new
 * start of it goes to the host, on the same port.
 */
export function createLocalLifecycle(options: LocalLifecycleOptions): LocalLifecycle {
  const { dataDir, logger } = options;
  const stopGraceMs = options.stopGraceMs ?? 5000;
  const policyFile = egressPolicyPath(dataDir);
  const exits = new ExitWatch({ pollMs: options.exitPollMs, onObserverError: observerWarning(logger, options.onObserverError) });
  const policyText = `${JSON.stringify(options.egressPolicy ?? proxyEgressPolicy(undefined, undefined))}\n`;
  let policyWritten: Promise<void> | undefined;
  function writeEgressPolicy(): Promise<void> {
    policyWritten ??= (async () => {
      await mkdir(dataDir, { recursive: true, mode: 0o700 });
      const existing = await readFile(policyFile, 'utf8').catch(() => undefined);
      if (existing === policyText) return;
      await writeFileAtomic(policyFile, policyText, 0o600);
      logger.info({ file: policyFile }, 'egress policy written for the local proxies');
    })().catch((err: unknown) => {
      policyWritten = undefined;
      throw new LocalInstanceError(`could not write the egress policy ${policyFile}: ${(err as Error).message}`, { cause: err });
    });
    return policyWritten;
  }
  const program = hostProgramInstaller(dataDir, logger);
  const host = new ProxyHostSupervisor({ dataDir, logger, program, policyFile, onChildExit: (pid) => exits.check(pid) });
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

  async function readState(dir: string): Promise<{ intent?: IntentRecord; record?: InstanceRecord }> {
    const intent = asIntent(await readJson(join(dir, INTENT_FILE)));
    const record = asInstance(await readJson(join(dir, INSTANCE_FILE)));
    return { intent, record };
  }

  /** A record of the earlier model whose process still runs. */
  async function legacyAlive(dir: string, record: InstanceRecord | undefined): Promise<boolean> {
    return record !== undefined && record.host !== true && (await isProxyProcess(record.pid, dir));
  }

  function watchHosted(intent: IntentRecord, record: InstanceRecord, removal: number | undefined): void {
    if (removals.get(intent.name) !== removal) return;
    exits.watch({
      name: intent.name,
      owner: intent.owner,
      id: hostInstanceId(record),
      pid: record.pid,
      isOurs: () => isHostProcess(record.pid, dataDir),
      exitMessage: `proxy host ${record.pid} exited`,
    });
  }

  function watchLegacy(dir: string, intent: IntentRecord, record: InstanceRecord, removal: number | undefined): void {
    if (removals.get(intent.name) !== removal) return;
    exits.watch({
      name: intent.name,
      owner: intent.owner,
      id: String(record.pid),
      pid: record.pid,
      isOurs: () => isProxyProcess(record.pid, dir),
      exitMessage: `proxy process ${record.pid} exited`,
    });
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
      watchHosted(intent, record, removal);
      return { ...base, id: hostInstanceId(record), state: 'running', endpoint: { host: '127.0.0.1', port: record.port } };
    }
    if (await legacyAlive(dir, record)) {
      watchLegacy(dir, intent, record!, removal);
      return { ...base, id: String(record!.pid), state: 'running', endpoint: { host: '127.0.0.1', port: record!.port } };
    }
    const starting = await findProxyProcesses(dir);
    if (starting[0] !== undefined) return { ...base, id: String(starting[0]), state: 'provisioning' };
    // Out of descriptors here says nothing about the proxy: the look fails (retried), it is not "failed".
    const running = await host.running(AbortSignal.timeout(5000)).catch((err: unknown) => {
      if (observerFailure('the proxy host', err)) throw err;
      return undefined;
    });
    if (running && record) {
      // The host that served it is gone and a new one runs: it brings the proxy back (or the next ensure asks it to).
      return { ...base, id: '', state: 'provisioning', message: `proxy host ${record.pid} is no longer running; host ${running.pid} restarts the proxy` };
    }
    const tail = await logTail(record?.host === true || !record ? join(hostDir(dataDir), HOST_LOG) : join(dir, LOG_FILE));
    const what = record?.host === true ? `proxy host ${record.pid}` : `proxy process ${record?.pid ?? ''}`;
    const message = record
      ? `${what} is no longer running${tail ? `; last log lines:\n${tail}` : ''}`
      : `proxy was never started (intent recorded at ${intent.createdAt})${tail ? `; last log lines:\n${tail}` : ''}`;
    return { ...base, id: record ? (record.host === true ? hostInstanceId(record) : String(record.pid)) : '', state: 'failed', message };
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
    let { intent, record } = await readState(dir);
    if (intent && !sameOwner(intent, spec)) {
      throw new ProvisioningError(
        `instance "${spec.name}" belongs to ${intent.owner.fleet}/${intent.owner.proxy}, not ${spec.owner.fleet}/${spec.owner.proxy}`,
      );
    }
    // A deletion that did not finish (its worker died): the name is wanted again.
    await rm(join(dir, DELETING_FILE), { force: true });
    if (!intent) {
      intent = {
        name: spec.name,
        owner: spec.owner,
        createdAt: new Date().toISOString(),
        ...(spec.placement === undefined ? {} : { placement: spec.placement }),
      };
    }
    if (addresses) {
      const address = await addresses.claim(spec.name, intent.sourceAddress, signal);
      if (address !== intent.sourceAddress) {
        intent = { ...intent, sourceAddress: address };
        await writeJsonAtomic(join(dir, INTENT_FILE), intent);
        log.info({ dir, sourceAddress: address }, 'local instance intent recorded');
      }
    }
    if (!(await readJson(join(dir, INTENT_FILE)))) {
      await writeJsonAtomic(join(dir, INTENT_FILE), intent);
      log.info({ dir }, 'local instance intent recorded');
    }
    const stored = asCredentials(await readJson(join(dir, CREDENTIALS_FILE)));
    const credentialsChanged = !stored || stored.username !== spec.credentials.username || stored.password !== spec.credentials.password;
    if (credentialsChanged) await writeJsonAtomic(join(dir, CREDENTIALS_FILE), spec.credentials, 0o600);

    if (await legacyAlive(dir, record)) {
      if (credentialsChanged) {
        sendSignal(record!.pid, 'SIGHUP');
        log.info({ pid: record!.pid }, 'credentials changed; proxy process of the earlier model told to reload them');
      }
      return describe(dir, intent, record, removal);
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
    record = served;
    return describe(dir, intent, record, removal, record.pid);
  }

  async function stopLegacy(name: string, dir: string, pids: Set<number>, signal: AbortSignal): Promise<void> {
    for (const pid of pids) sendSignal(pid, 'SIGTERM');
    for (const pid of pids) {
      if (await waitUntilGone(pid, dir, signal, stopGraceMs)) continue;
      // Still ours after the grace period (checked again just now): force it.
      if (await isProxyProcess(pid, dir)) sendSignal(pid, 'SIGKILL');
      if (!(await waitUntilGone(pid, dir, signal, stopGraceMs))) {
        throw new LocalInstanceError(`local proxy process ${pid} of "${name}" did not exit after SIGKILL`);
      }
    }
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
    // Processes of the earlier model: only an instance the host has not served yet can have one
    // (scanning /proc costs a read per process on the machine, too much for every deletion).
    const pids = new Set(record?.host === true ? [] : await findProxyProcesses(dir));
    if (record && record.host !== true && (await isProxyProcess(record.pid, dir))) pids.add(record.pid);
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
    await stopLegacy(name, dir, pids, signal);
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
        let live = hostAlive.get(record.pid);
        if (live === undefined) hostAlive.set(record.pid, (live = await isHostProcess(record.pid, dataDir)));
        if (live) watchHosted(intent, record, removal);
        else if (removals.get(name) === removal)
          exits.report(
            { name, owner: intent.owner, id: hostInstanceId(record), pid: record.pid, isOurs: () => Promise.resolve(false), exitMessage: '' },
            `proxy host ${record.pid} is no longer running`,
          );
        continue;
      }
      const watched: WatchedProxy = {
        name,
        owner: intent.owner,
        id: String(record.pid),
        pid: record.pid,
        isOurs: () => isProxyProcess(record.pid, dir),
        exitMessage: `proxy process ${record.pid} exited`,
      };
      if (await isProxyProcess(record.pid, dir)) {
        if (removals.get(name) === removal) exits.watch(watched);
      } else if ((await findProxyProcesses(dir)).length === 0 && removals.get(name) === removal) {
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
