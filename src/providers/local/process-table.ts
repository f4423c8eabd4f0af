import { readdir, readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { observerFailure } from '../../observer-errors.ts';

/**
 * Identifies local proxy processes through /proc, so that nothing but our own proxy process
 * is ever signalled: a pid recorded in a state file may have been reused by the time we read it.
 */

/** The file name of the built proxy program (proxy-program.ts writes it). */
export const PROXY_PROGRAM_FILE = 'proxy-process.cjs';
/** File names a local proxy process runs: the built program, or its source under a TypeScript loader. */
const PROGRAM_NAMES = new Set([PROXY_PROGRAM_FILE, 'proxy-process.ts']);
/** The file name of the built proxy-host program (proxy-program.ts writes it). */
export const PROXY_HOST_PROGRAM_FILE = 'proxy-host.cjs';
/** File names a proxy host runs: the built program, or its source under a TypeScript loader. */
const HOST_PROGRAM_NAMES = new Set([PROXY_HOST_PROGRAM_FILE, 'proxy-host.ts']);

/** True when `arg` (an argument of a process's command line) names a local proxy program. */
export function isProxyProgram(arg: string): boolean {
  return PROGRAM_NAMES.has(basename(arg));
}

/** True when `arg` names the proxy host program. */
export function isProxyHostProgram(arg: string): boolean {
  return HOST_PROGRAM_NAMES.has(basename(arg));
}

/** Options of node's that take the next argument as their value. */
const VALUE_OPTIONS = new Set(['--import', '--require', '--loader', '--experimental-loader']);

function isNode(executable: string): boolean {
  return executable === process.execPath || basename(executable) === 'node';
}

/** Sends `sig` to `pid`; a process that is already gone is no error. */
export function sendSignal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/** Waits `ms`; on abort rejects with the signal's reason (like `throwIfAborted`), not a generic AbortError. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const fail = (): void => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted', { cause: signal.reason }));
    if (signal.aborted) return fail();
    const onAbort = (): void => {
      clearTimeout(timer);
      fail();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The command-line arguments of a live process; undefined when it is gone or a zombie. Throws
 * ObserverResourceError when this process cannot open the file (EMFILE, ENFILE, ENOMEM): that
 * says nothing about the process looked at, which must not be taken for gone.
 */
async function cmdline(pid: number): Promise<string[] | undefined> {
  try {
    const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    // A zombie (exited, not yet reaped) has an empty command line: it is gone for our purposes.
    if (raw.length === 0) return undefined;
    return raw.split('\0').filter((arg) => arg.length > 0);
  } catch (err) {
    const own = observerFailure(`reading /proc/${pid}/cmdline`, err);
    if (own) throw own;
    return undefined;
  }
}

/** True when `pid` is alive and node itself runs one of `programs` with `firstArg` as the argument after it. */
async function runsProgram(pid: number, programs: ReadonlySet<string>, firstArg: string): Promise<boolean> {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const args = await cmdline(pid);
  if (!args) return false;
  const i = args.findIndex((arg) => programs.has(basename(arg)));
  if (i <= 0 || args[i + 1] !== firstArg || !isNode(args[0] ?? '')) return false;
  // Node runs the program itself: everything before it is an option of node's (not `-e CODE` whose
  // arguments merely name it, nor a wrapper such as `time` or `strace`).
  for (let j = 1; j < i; j++) {
    const arg = args[j] ?? '';
    if (VALUE_OPTIONS.has(arg)) j++;
    else if (!arg.startsWith('--') || arg === '--eval' || arg === '--print') return false;
  }
  return true;
}

/** True when `pid` is alive and runs a (per-instance) local proxy program for `instanceDir` (the argument after it). */
export function isProxyProcess(pid: number, instanceDir: string): Promise<boolean> {
  return runsProgram(pid, PROGRAM_NAMES, instanceDir);
}

/** True when `pid` is alive and runs the proxy host of `dataDir` (the argument after the program). */
export function isHostProcess(pid: number, dataDir: string): Promise<boolean> {
  return runsProgram(pid, HOST_PROGRAM_NAMES, dataDir);
}

/** Every live process that runs the proxy host of `dataDir` (normally none or one). */
export async function findHostProcesses(dataDir: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (await isHostProcess(pid, dataDir)) found.push(pid);
  }
  return found;
}

/** Every live process that runs a local proxy program for `instanceDir` (normally none or one). */
export async function findProxyProcesses(instanceDir: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (await isProxyProcess(pid, instanceDir)) found.push(pid);
  }
  return found;
}

/**
 * Waits until `pid` no longer runs our proxy for `instanceDir`, polling /proc (a detached process
 * that another worker started gives us no exit event). Rejects with the signal's reason on abort.
 */
export async function waitUntilGone(pid: number, instanceDir: string, signal: AbortSignal, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (let every = 5; ; every = Math.min(every * 2, 50)) {
    signal.throwIfAborted();
    if (!(await isProxyProcess(pid, instanceDir))) return true;
    if (performance.now() > deadline) return false;
    await pause(every, signal);
  }
}
