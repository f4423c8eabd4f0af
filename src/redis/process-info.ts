import { readFileSync } from 'node:fs';
import { readdir, readFile, readlink } from 'node:fs/promises';
import { basename } from 'node:path';

/**
 * What this machine says about a process, to tell "the process we recorded" from "another
 * process that got its pid". Linux answers through /proc; elsewhere only liveness is known.
 */
export interface ProcessIdentity {
  pid: number;
  /** Start time in clock ticks since boot (field 22 of /proc/<pid>/stat); undefined without /proc. */
  startTicks: number | undefined;
}

/** Fields 3… of /proc/<pid>/stat (state first), or undefined (gone, or no /proc). */
function statFields(pid: number): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/**
 * True when a process with this pid runs (ours or another user's). A zombie — dead, waiting for
 * its parent to collect it, as a killed owner's redis-server may be under a container's init —
 * does not count.
 */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const state = statFields(pid)?.[0];
  return state !== 'Z' && state !== 'X';
}

/** The start time of a process from /proc/<pid>/stat, or undefined (gone, or no /proc). */
export function startTicksOf(pid: number): number | undefined {
  const ticks = Number(statFields(pid)?.[19]);
  return Number.isFinite(ticks) ? ticks : undefined;
}

export function identityOf(pid: number): ProcessIdentity {
  return { pid, startTicks: startTicksOf(pid) };
}

/**
 * True when `recorded` still runs: the pid is alive and, where /proc tells start times, it
 * started when recorded (so a recycled pid is not mistaken for it).
 */
export function stillRunning(recorded: ProcessIdentity): boolean {
  if (!isAlive(recorded.pid)) return false;
  if (recorded.startTicks === undefined) return true;
  const now = startTicksOf(recorded.pid);
  // Alive but /proc unreadable for it: cannot tell, so assume it is the one (never a false "stale").
  return now === undefined || now === recorded.startTicks;
}

/** The command line of a process (arguments joined by spaces), when /proc shows it. */
export async function commandLineOf(pid: number): Promise<string | undefined> {
  try {
    const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    return raw.split('\0').filter(Boolean).join(' ') || undefined;
  } catch {
    return undefined;
  }
}

/** The executable and working directory of a process (same user only), when /proc shows them. */
export async function exeAndCwdOf(pid: number): Promise<{ exe: string | undefined; cwd: string | undefined }> {
  const link = (path: string): Promise<string | undefined> => readlink(path).catch(() => undefined);
  const [exe, cwd] = await Promise.all([link(`/proc/${pid}/exe`), link(`/proc/${pid}/cwd`)]);
  return { exe, cwd };
}

/**
 * Running processes whose executable's name starts with `exePrefix` and whose working directory
 * is `dir` (a real path): on Linux, through /proc; elsewhere none are found. Only processes of
 * this user (or all, for root) show their working directory.
 */
export async function processesIn(dir: string, exePrefix: string): Promise<number[]> {
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    const { exe, cwd } = await exeAndCwdOf(pid);
    if (cwd === dir && exe !== undefined && basename(exe).startsWith(exePrefix) && isAlive(pid)) found.push(pid);
  }
  return found;
}
