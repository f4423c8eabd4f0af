/**
 * Migration from the earlier model of local proxies: one detached proxy process per instance
 * (proxy-process.ts, run as `<dataDir>/bin/proxy-process.cjs <instanceDir>`), its `instance.json`
 * written without `host: true`. Nothing starts one any more, but a machine upgraded while they ran
 * still has them (they are detached: they outlived the worker that started them). The local
 * lifecycle adopts each as it is — described, watched, given new credentials by SIGHUP, stopped by
 * SIGTERM (then SIGKILL) on deletion — until it exits or is deleted; the next start of that name
 * goes to the proxy host, on the same port. Everything the lifecycle knows of that model is here.
 */
import { join } from 'node:path';
import type { Logger } from '../../logging.ts';
import type { InstanceOwner } from '../lifecycle.ts';
import type { WatchedProxy } from './exit-watch.ts';
import { LocalInstanceError } from './instance-error.ts';
import { LOG_FILE, type InstanceRecord } from './instance-files.ts';
import { findProxyProcesses, isProxyProcess, sendSignal, waitUntilGone } from './process-table.ts';

/** A record the earlier model wrote: a per-instance process served it, not the host. */
export function isLegacyRecord(record: InstanceRecord): boolean {
  return record.host !== true;
}

/** Whether the record is the earlier model's and its process still runs (a record of the host: false, without a look). */
export async function legacyAlive(dir: string, record: InstanceRecord | undefined): Promise<boolean> {
  return record !== undefined && isLegacyRecord(record) && (await isProxyProcess(record.pid, dir));
}

/** Such an instance's id: its process's pid (the host's instances are `<pid>:<port>`). */
export function legacyInstanceId(record: InstanceRecord): string {
  return String(record.pid);
}

/** What the exit watch looks at for such an instance: its own process. */
export function legacyWatched(dir: string, name: string, owner: InstanceOwner, record: InstanceRecord): WatchedProxy {
  return {
    name,
    owner,
    id: legacyInstanceId(record),
    pid: record.pid,
    isOurs: () => isProxyProcess(record.pid, dir),
    exitMessage: `proxy process ${record.pid} exited`,
  };
}

/** A process of the earlier model running for the instance whatever its record says (one still starting): its pid. */
export async function legacyProcessFor(dir: string): Promise<number | undefined> {
  return (await findProxyProcesses(dir))[0];
}

/** Where such a process logged. */
export function legacyLogFile(dir: string): string {
  return join(dir, LOG_FILE);
}

/** The instance's credentials changed: its process re-reads them on SIGHUP. */
export function reloadLegacyCredentials(record: InstanceRecord, log: Logger): void {
  sendSignal(record.pid, 'SIGHUP');
  log.info({ pid: record.pid }, 'credentials changed; proxy process of the earlier model told to reload them');
}

/**
 * The processes of the earlier model to stop before the instance is deleted. Only an instance the
 * host has not served yet can have one (scanning /proc costs a read per process on the machine,
 * too much for every deletion).
 */
export async function legacyProcesses(dir: string, record: InstanceRecord | undefined): Promise<Set<number>> {
  const pids = new Set(record?.host === true ? [] : await findProxyProcesses(dir));
  if (record !== undefined && isLegacyRecord(record) && (await isProxyProcess(record.pid, dir))) pids.add(record.pid);
  return pids;
}

/** SIGTERM to each, SIGKILL to one still ours after `graceMs`; a LocalInstanceError when one outlives that too. */
export async function stopLegacy(name: string, dir: string, pids: ReadonlySet<number>, signal: AbortSignal, graceMs: number): Promise<void> {
  for (const pid of pids) sendSignal(pid, 'SIGTERM');
  for (const pid of pids) {
    if (await waitUntilGone(pid, dir, signal, graceMs)) continue;
    // Still ours after the grace period (checked again just now): force it.
    if (await isProxyProcess(pid, dir)) sendSignal(pid, 'SIGKILL');
    if (!(await waitUntilGone(pid, dir, signal, graceMs))) {
      throw new LocalInstanceError(`local proxy process ${pid} of "${name}" did not exit after SIGKILL`);
    }
  }
}
