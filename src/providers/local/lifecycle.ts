import { spawn } from 'node:child_process';
import { mkdir, open, readdir, readFile, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { proxyEgressPolicy, type ProxyEgressPolicy } from '../../egress/policy-config.ts';
import { EgressError } from '../../errors.ts';
import type { Logger } from '../../logging.ts';
import { ProvisioningError, type Instance, type InstanceExit, type InstanceSpec, type ProxyLifecycle } from '../lifecycle.ts';
import {
  asCredentials,
  asInstance,
  asIntent,
  CREDENTIALS_FILE,
  egressPolicyPath,
  INSTANCE_FILE,
  instanceDir,
  instancesDir,
  INTENT_FILE,
  LOG_FILE,
  readJson,
  writeJsonAtomic,
  writeFileAtomic,
  type InstanceRecord,
  type IntentRecord,
} from './instance-files.ts';
import { ExitWatch } from './exit-watch.ts';
import { findProxyProcesses, isProxyProcess, pause, waitUntilGone } from './process-table.ts';
import { buildProxyProgram } from './proxy-program.ts';

export interface LocalLifecycleOptions {
  /** The provider's data directory; instances live under `<dataDir>/instances/<name>/`. */
  dataDir: string;
  logger: Logger;
  /** How long a SIGTERM'd proxy gets before SIGKILL (default 5 s). */
  stopGraceMs?: number;
  /** The egress policy the proxies enforce (default: the default deny alone, nothing guarded). */
  egressPolicy?: ProxyEgressPolicy;
  /** How often watched proxy processes are looked at for an exit (default 200 ms). */
  exitPollMs?: number;
}

export interface LocalLifecycle extends ProxyLifecycle {
  /**
   * Writes the egress policy to `<dataDir>/egress-policy.json` when it differs from what is there
   * (atomically); running proxies, adopted ones included, watch that file and apply it at once.
   * Done once per lifecycle, before the first proxy starts; a failed write is tried again next time.
   */
  writeEgressPolicy(): Promise<void>;
  /** Reports the exit of every proxy process of the data directory, adopted ones included (see exit-watch.ts). */
  onInstanceExit(listener: (exit: InstanceExit) => void): () => void;
  /** Stops watching processes (they keep running). */
  close(): void;
}

/** A local instance could not be started or stopped; retrying may help. */
export class LocalInstanceError extends EgressError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_LOCAL_INSTANCE', message, { ...options, retryable: true });
  }
}

const NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Sends `sig` to `pid`; a process that is already gone is no error. */
function sendSignal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

function sameOwner(a: IntentRecord, b: InstanceSpec): boolean {
  return a.owner.fleet === b.owner.fleet && a.owner.proxy === b.owner.proxy;
}

async function logTail(dir: string): Promise<string> {
  try {
    const text = await readFile(join(dir, LOG_FILE), 'utf8');
    const lines = text.trimEnd().split('\n');
    return lines.slice(-5).join('\n');
  } catch {
    return '';
  }
}

/**
 * Local proxies: one detached forward-proxy process per instance on 127.0.0.1, its state in
 * files under the data directory, so that instances outlive the worker that started them and a
 * new worker finds them again.
 */
export function createLocalLifecycle(options: LocalLifecycleOptions): LocalLifecycle {
  const { dataDir, logger } = options;
  const stopGraceMs = options.stopGraceMs ?? 5000;
  const policyFile = egressPolicyPath(dataDir);
  const exits = new ExitWatch({ pollMs: options.exitPollMs });
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
  let built: Promise<string> | undefined;
  /** The proxy program's path, built on first use; a failed build is tried again next time. */
  function program(): Promise<string> {
    built ??= buildProxyProgram(dataDir).catch((err: unknown) => {
      built = undefined;
      throw err;
    });
    return built;
  }
  /** Serialises the calls on one name inside this process. */
  const locks = new Map<string, Promise<unknown>>();

  function withLock<T>(name: string, run: () => Promise<T>): Promise<T> {
    const previous = locks.get(name) ?? Promise.resolve();
    const next = previous.then(run, run);
    const settled = next.catch(() => undefined);
    locks.set(name, settled);
    void settled.then(() => {
      if (locks.get(name) === settled) locks.delete(name);
    });
    return next;
  }

  async function readState(dir: string): Promise<{ intent?: IntentRecord; record?: InstanceRecord }> {
    const intent = asIntent(await readJson(join(dir, INTENT_FILE)));
    const record = asInstance(await readJson(join(dir, INSTANCE_FILE)));
    return { intent, record };
  }

  async function describe(dir: string, intent: IntentRecord, record: InstanceRecord | undefined): Promise<Instance> {
    const base = {
      name: intent.name,
      owner: intent.owner,
      createdAt: intent.createdAt,
      ...(intent.placement === undefined ? {} : { placement: intent.placement }),
    };
    if (record && (await isProxyProcess(record.pid, dir))) {
      // Every running process we describe is watched, so one adopted from an earlier worker is too.
      exits.watch({ pid: record.pid, dir, name: intent.name, owner: intent.owner });
      return { ...base, id: String(record.pid), state: 'running', endpoint: { host: '127.0.0.1', port: record.port } };
    }
    const starting = await findProxyProcesses(dir);
    if (starting[0] !== undefined) return { ...base, id: String(starting[0]), state: 'provisioning' };
    const tail = await logTail(dir);
    const message = record
      ? `proxy process ${record.pid} is no longer running${tail ? `; last log lines:\n${tail}` : ''}`
      : `proxy process was never started (intent recorded at ${intent.createdAt})${tail ? `; last log lines:\n${tail}` : ''}`;
    return { ...base, id: record ? String(record.pid) : '', state: 'failed', message };
  }

  /**
   * Waits until a proxy process for `dir` has recorded itself as listening. `childExited` tells
   * whether the process we spawned (if any) is gone; we give up only when no process serves `dir`.
   */
  async function waitListening(dir: string, childExited: () => boolean, signal: AbortSignal): Promise<InstanceRecord> {
    for (let every = 5; ; every = Math.min(every * 2, 40)) {
      signal.throwIfAborted();
      const record = asInstance(await readJson(join(dir, INSTANCE_FILE)));
      if (record && (await isProxyProcess(record.pid, dir))) return record;
      // Our child exits at once when it finds another process serving `dir`: then wait for that one.
      if (childExited() && (await findProxyProcesses(dir)).length === 0) {
        const again = asInstance(await readJson(join(dir, INSTANCE_FILE)));
        if (again && (await isProxyProcess(again.pid, dir))) return again;
        throw new LocalInstanceError(`local proxy process for ${dir} exited before listening: ${await logTail(dir)}`);
      }
      await pause(every, signal);
    }
  }

  /** Starts the proxy process for `dir` (detached) and waits until it listens. */
  async function start(dir: string, previousPort: number | undefined, signal: AbortSignal): Promise<InstanceRecord> {
    const log = await open(join(dir, LOG_FILE), 'a', 0o600);
    let exited = false;
    try {
      await writeEgressPolicy();
      const args = [await program(), dir, ...(previousPort ? ['--port', String(previousPort)] : []), '--policy', policyFile];
      const child = spawn(process.execPath, args, { cwd: dir, detached: true, stdio: ['ignore', log.fd, log.fd] });
      child.once('exit', () => {
        exited = true;
        if (child.pid !== undefined) exits.check(child.pid);
      });
      await new Promise<void>((resolveSpawn, reject) => {
        child.once('spawn', resolveSpawn);
        child.once('error', reject);
      });
      child.unref();
      logger.info({ pid: child.pid, dir }, 'local proxy process spawned');
    } finally {
      await log.close();
    }
    return waitListening(dir, () => exited, signal);
  }

  async function ensure(spec: InstanceSpec, signal: AbortSignal): Promise<Instance> {
    if (!NAME_PATTERN.test(spec.name)) {
      throw new ProvisioningError(`instance name "${spec.name}" must be lower case letters, digits and "-", at most 63 characters`);
    }
    const dir = instanceDir(dataDir, spec.name);
    const log = logger.child({ instance: spec.name, proxy: spec.owner.proxy });
    signal.throwIfAborted();
    await writeEgressPolicy();
    await mkdir(dir, { recursive: true, mode: 0o700 });
    let { intent, record } = await readState(dir);
    if (intent && !sameOwner(intent, spec)) {
      throw new ProvisioningError(
        `instance "${spec.name}" belongs to ${intent.owner.fleet}/${intent.owner.proxy}, not ${spec.owner.fleet}/${spec.owner.proxy}`,
      );
    }
    if (!intent) {
      intent = {
        name: spec.name,
        owner: spec.owner,
        createdAt: new Date().toISOString(),
        ...(spec.placement === undefined ? {} : { placement: spec.placement }),
      };
      await writeJsonAtomic(join(dir, INTENT_FILE), intent);
      log.info({ dir }, 'local instance intent recorded');
    }
    const stored = asCredentials(await readJson(join(dir, CREDENTIALS_FILE)));
    const credentialsChanged = !stored || stored.username !== spec.credentials.username || stored.password !== spec.credentials.password;
    if (credentialsChanged) await writeJsonAtomic(join(dir, CREDENTIALS_FILE), spec.credentials, 0o600);

    if (record && (await isProxyProcess(record.pid, dir))) {
      if (credentialsChanged) {
        sendSignal(record.pid, 'SIGHUP');
        log.info({ pid: record.pid }, 'credentials changed; proxy told to reload them');
      }
      return describe(dir, intent, record);
    }
    const running = await findProxyProcesses(dir);
    if (running.length === 0) {
      const previousPort = record?.port;
      if (record) {
        log.warn({ pid: record.pid }, 'local proxy process is gone; restarting it');
        await rm(join(dir, INSTANCE_FILE), { force: true });
      }
      record = await start(dir, previousPort, signal);
    } else {
      // Started by a worker that crashed before it saw the process listen: adopt it.
      log.info({ pids: running }, 'adopting a proxy process that is already starting');
      record = await waitListening(dir, () => true, signal);
    }
    return describe(dir, intent, record);
  }

  async function remove(name: string, signal: AbortSignal): Promise<void> {
    if (!NAME_PATTERN.test(name)) return;
    const dir = instanceDir(dataDir, name);
    const { intent, record } = await readState(dir);
    const pids = new Set(await findProxyProcesses(dir));
    if (record && (await isProxyProcess(record.pid, dir))) pids.add(record.pid);
    if (!intent && !record && pids.size === 0) {
      // No intent recorded: not an instance of ours. Only an empty directory (a create that died
      // right after making it) is removed; anything else there is left as it is.
      await rmdir(dir).catch(() => undefined);
      return;
    }
    // A deletion is not an exit to report.
    if (record) exits.unwatch(record.pid);
    for (const pid of pids) exits.unwatch(pid);
    for (const pid of pids) sendSignal(pid, 'SIGTERM');
    for (const pid of pids) {
      if (await waitUntilGone(pid, dir, signal, stopGraceMs)) continue;
      // Still ours after the grace period (checked again just now): force it.
      if (await isProxyProcess(pid, dir)) sendSignal(pid, 'SIGKILL');
      if (!(await waitUntilGone(pid, dir, signal, stopGraceMs))) {
        throw new LocalInstanceError(`local proxy process ${pid} of "${name}" did not exit after SIGKILL`);
      }
    }
    await rm(dir, { recursive: true, force: true });
    if (pids.size > 0 || record) logger.info({ instance: name, pids: [...pids] }, 'local instance deleted');
  }

  /**
   * Watches every proxy process already running under the data directory (adopted from an earlier
   * worker), and reports those recorded but no longer running.
   */
  async function watchRunning(): Promise<void> {
    let names: string[];
    try {
      names = (await readdir(instancesDir(dataDir), { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
    } catch {
      return;
    }
    for (const name of names) {
      const dir = instanceDir(dataDir, name);
      const { intent, record } = await readState(dir);
      if (!intent || !record) continue;
      const watched = { pid: record.pid, dir, name: intent.name, owner: intent.owner };
      // A process that died while no worker watched is reported now: its proxy is restarted at once.
      if (await isProxyProcess(record.pid, dir)) exits.watch(watched);
      else if ((await findProxyProcesses(dir)).length === 0) exits.report(watched, `proxy process ${record.pid} is no longer running`);
    }
  }

  return {
    writeEgressPolicy,
    close: () => exits.close(),
    onInstanceExit(listener) {
      const off = exits.subscribe(listener);
      watchRunning().catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'could not list running local proxies to watch'));
      return off;
    },
    ensureInstance: (spec, signal) => withLock(spec.name, () => ensure(spec, signal)),

    async getInstance(name, _placement, signal) {
      signal.throwIfAborted();
      if (!NAME_PATTERN.test(name)) return undefined;
      const dir = instanceDir(dataDir, name);
      const { intent, record } = await readState(dir);
      return intent ? describe(dir, intent, record) : undefined;
    },

    deleteInstance: (name, _placement, signal) => withLock(name, () => remove(name, signal)),

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
        const { intent, record } = await readState(dir);
        if (intent?.owner.fleet !== fleet || intent.name !== name) continue;
        yield await describe(dir, intent, record);
      }
    },
  };
}
